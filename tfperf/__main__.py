import sys

from tfperf.cli.main import main

sys.exit(main())
