"""Click commands, one module each; ``gradcli.cli`` registers them."""
