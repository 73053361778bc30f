"""tf.where with a pole in the unselected branch: NaN gradient.

tensorflow/tensorflow#20355. transfer(x) = where(x < 0, 1/(1 - x), log(x + 1))
is smooth at x = 1 (it is log(2) there, slope 1/2), but the unselected branch
1/(1 - x) has a pole at 1, and its gradient poisons the result. Right verdict:
not a pass.
"""

import tensorflow as tf

RIGHT = "fail"
CULPRIT = "RealDiv"


def model(x):
    return tf.where(x < 0.0, 1.0 / (1.0 - x), tf.math.log(x + 1.0))


inputs = {"x": [1.0]}
