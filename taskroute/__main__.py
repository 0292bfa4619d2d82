from taskroute.cli import main

main()
