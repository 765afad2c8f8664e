import sys

from bindery.local.stack import main

sys.exit(main())
