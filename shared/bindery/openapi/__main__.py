"""`python -m bindery.openapi > docs/openapi.json`"""

import json

from bindery.openapi import document

print(json.dumps(document(), indent=2, ensure_ascii=False))
