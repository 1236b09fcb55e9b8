from prefixguard.cli import main

main()
