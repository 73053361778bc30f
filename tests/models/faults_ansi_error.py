"""Raises while imported, with a message that holds an ANSI colour sequence,
NUL, ESC, BEL, form feed, a lone surrogate and U+FFFE: characters XML 1.0
cannot hold (the JUnit report must stay readable; JSON keeps them exactly)."""

raise RuntimeError("\x1b[31mred\x1b[0m text, NUL \x00, ESC \x1b, BEL \x07, FF \x0c, surrogate \udcff, \ufffe end")
