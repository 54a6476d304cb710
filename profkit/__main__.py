from profkit.cli import main

raise SystemExit(main())
