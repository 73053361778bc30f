"""``_masked_attention.py`` with the attention called twice, on the tokens
and on them reversed: one traced local function would serve both calls, but
the masks their arguments carry differ, and each call is checked with its own."""

from _masked_attention import ids, net

model = net(twice=True)
inputs = {"ids": ids}
