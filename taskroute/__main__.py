from taskroute.server.cli import main

main()
