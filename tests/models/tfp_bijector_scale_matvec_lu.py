"""tfb.ScaleMatvecLU, given as the model itself (_tfp_flows.py): a bijector TFP keeps in float32."""
from _tfp_flows import bijector_file

model, inputs = bijector_file("scale_matvec_lu")
