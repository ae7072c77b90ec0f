from cudal1_tui.cli.main import main

raise SystemExit(main())
