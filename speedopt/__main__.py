from speedopt.cli import main

raise SystemExit(main())
