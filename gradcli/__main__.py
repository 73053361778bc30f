from gradcli.cli import main

main(prog_name="gradcli")
