"""``_masked_attention.py`` with the attention called once."""

from _masked_attention import ids, net

model = net(twice=False)
inputs = {"ids": ids}
