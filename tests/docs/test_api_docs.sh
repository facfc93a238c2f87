#!/usr/bin/env bash
# api_docs: the API reference builds (scripts/docs.sh, Doxygen) and documents every function braid.h declares:
# each one has a description in Doxygen's XML, so a function added without a comment fails here. Also checks
# that the reference lists exactly the functions of the header (the filter in docs/api/ lost none).
# Usage: test_api_docs.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$src/scripts/docs.sh" "$work" >/dev/null
[ -s "$work/html/braid_8h.html" ] || { echo "FAIL no HTML reference"; exit 1; }
/usr/bin/python3 - "$work/xml/braid_8h.xml" "$src/include/braid.h" <<'PY'
import re, sys
import xml.etree.ElementTree as ET
xml_path, header = sys.argv[1], sys.argv[2]
declared = set(re.findall(r'\b(braid_[a-z0-9_]+)\s*\(', open(header).read()))
documented, missing = set(), []
for md in ET.parse(xml_path).iter('memberdef'):
    if md.get('kind') != 'function':
        continue
    name = md.find('name').text
    documented.add(name)
    text = ''.join(md.find('briefdescription').itertext()) + ''.join(md.find('detaileddescription').itertext())
    if not text.strip():
        missing.append(name)
# names that appear with "(" in prose comments only are not declarations
lost = sorted(n for n in declared - documented if re.search(r'^[^/*\n]*\b%s\s*\(' % n, open(header).read(), re.M))
fails = 0
for n in sorted(missing):
    print("FAIL undocumented:", n); fails += 1
for n in lost:
    print("FAIL declared but not in the reference:", n); fails += 1
print("%d functions documented, %d failed" % (len(documented) - len(missing), fails))
sys.exit(1 if fails else 0)
PY
