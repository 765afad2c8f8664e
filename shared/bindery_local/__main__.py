import os
import sys

from bindery_local.stack import main

code = main()
# The stop has already shut every server and thread (or cut them off at its deadline). Interpreter
# teardown of moto, botocore and the engines added up to 8 s more on a busy machine: end the process now.
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
