"""File formats: how our files are laid out, written and read back. JSON Lines record files that survive a
kill (`jsonl`: the journal, the stage log, the eval runners' records), BibTeX exports of a report's
references (`exports`), and the command line's settings files, `deepresearch.toml` (`config_file`)."""
