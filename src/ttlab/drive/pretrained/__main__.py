from ttlab.drive.pretrained import main

raise SystemExit(main())
