"""Stop-word lists: scikit-learn's English list, and the short list search engine queries drop.

`ENGLISH_STOP_WORDS` is the Glasgow Information Retrieval Group's list, as
`sklearn.feature_extraction.text.ENGLISH_STOP_WORDS` ships it (318 words, BSD-3), kept here because importing it
costs every process ~1.5 s; tests/test_rendering.py checks the copy against scikit-learn's.
"""

ENGLISH_STOP_WORDS = frozenset(
    """
    a about above across after afterwards again against all almost alone along already also although always am
    among amongst amoungst amount an and another any anyhow anyone anything anyway anywhere are around as at
    back be became because become becomes becoming been before beforehand behind being below beside besides
    between beyond bill both bottom but by call can cannot cant co con could couldnt cry de describe detail do
    done down due during each eg eight either eleven else elsewhere empty enough etc even ever every everyone
    everything everywhere except few fifteen fifty fill find fire first five for former formerly forty found
    four from front full further get give go had has hasnt have he hence her here hereafter hereby herein
    hereupon hers herself him himself his how however hundred i ie if in inc indeed interest into is it its
    itself keep last latter latterly least less ltd made many may me meanwhile might mill mine more moreover
    most mostly move much must my myself name namely neither never nevertheless next nine no nobody none noone
    nor not nothing now nowhere of off often on once one only onto or other others otherwise our ours ourselves
    out over own part per perhaps please put rather re same see seem seemed seeming seems serious several she
    should show side since sincere six sixty so some somehow someone something sometime sometimes somewhere
    still such system take ten than that the their them themselves then thence there thereafter thereby
    therefore therein thereupon these they thick thin third this those though three through throughout thru thus
    to together too top toward towards twelve twenty two un under until up upon us very via was we well were
    what whatever when whence whenever where whereafter whereas whereby wherein whereupon wherever whether which
    while whither who whoever whole whom whose why will with within without would yet you your yours yourself
    yourselves
""".split()
)

# What a plain-language question sent to a search engine (retrievers/engines) leaves out before its words are
# OR-ed: function and question words only. Not the list above: it drops words a scientific query needs
# ("system", "computer", "found", "first"), and it keeps "does" and "versus".
QUERY_STOP_WORDS = frozenset(
    """
    a among an and are as at be between by do does for from how in into is it of on or the their there these
    this those to versus vs was were what which why with
""".split()
)
