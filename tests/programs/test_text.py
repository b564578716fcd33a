from deepresearch.programs.runtime.text import collapse_whitespace, norm_text, norm_title


def test_collapse_whitespace_puts_text_on_one_line_and_keeps_case():
    assert collapse_whitespace("  Soil\tCarbon \n Loss ") == "Soil Carbon Loss"
    assert collapse_whitespace(None) == "" and collapse_whitespace(" \n ") == ""


def test_norm_text_ignores_case_and_whitespace_but_not_punctuation():
    assert norm_text("  Soil  CARBON\nloss ") == norm_text("soil carbon loss") == "soil carbon loss"
    assert norm_text("COVID-19 vaccines?") == "covid-19 vaccines?"
    assert norm_text(None) == ""


def test_norm_title_drops_punctuation_rather_than_spacing_it():
    assert norm_title("  Self-Attention:  A Survey. ") == "selfattention a survey"
    assert norm_title("BERT (Devlin et al.)") == norm_title("bert devlin et al")
    assert norm_title("Über_Modelle") == "über_modelle"  # word characters, underscore included, are kept
