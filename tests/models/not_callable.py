model = 3
inputs = {"x": [1.0]}
