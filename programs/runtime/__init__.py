"""What every program runs on: the scheduler, usage meter, events, LM setup, redaction and the stage base."""
