import dspy


# Behaviour: DeepResearch-Eco's ClarifyQuestion (optional, before research). Wording is ours. The program
# caps, trims and deduplicates the questions (programs/stages/clarifier.py); the field is `question`,
# as in every other stage, where DeepResearch-Eco says `query`.
class ClarifyQuestion(dspy.Signature):
    """Before any research starts, ask the person who wrote the research question about what it leaves
    open: the scope, the population or setting, the period, or the kind of answer they need.
    Ask only what the wording cannot settle and what would change how the question is researched.
    Each question is short and answerable in a few words; when the question is already clear, ask none."""

    question: str = dspy.InputField(desc="the research question as its author wrote it")
    max_questions: int = dspy.InputField()
    questions: list[str] = dspy.OutputField(desc="at most max_questions; empty when the question is clear")
