#!/usr/bin/env bash
# copyright.sh BINARY... — writes the package's copyright file to standard
# output: roam's own notice and licence, then, for every Go module linked
# into the given Go binaries (as `go version -m` lists them, so exactly what
# ships), its licence text from the module cache. `make deb` installs it as
# /usr/share/doc/roam/copyright. A module without a licence file stops it:
# a package must not ship code whose terms it cannot state.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: copyright.sh BINARY..." >&2; exit 2; }
cat <<'HEAD'
roam: a single-system-image cluster for Linux, in user space.

Copyright 2026 The roam developers

Licensed under the Apache License, Version 2.0 (the "License"); you may not
use these files except in compliance with the License. Unless required by
applicable law or agreed to in writing, software distributed under the
License is distributed on an "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS
OF ANY KIND, either express or implied. See the License for the specific
language governing permissions and limitations under the License.

On Debian systems, the full text of the Apache License, Version 2.0 is in
/usr/share/common-licenses/Apache-2.0.

/usr/libexec/roam/roam-init is linked statically with musl, the C library
of the musl-tools package, under the MIT licence (on Debian systems in
/usr/share/doc/musl/copyright); its source is the musl source package of
the distribution it was built on.

The programs roam and roamd include the Go standard library and the Go
modules below, each under the licence that follows its name.
HEAD
std=$(go env GOROOT)/LICENSE
printf '\n---- Go standard library %s ----\n\n' "$(go env GOVERSION)"
cat "$std"
go version -m "$@" | awk '$1 == "dep" {print $2, $3} $1 == "=>" {print $2, $3}' | sort -u |
while read -r mod ver; do
  dir=$(go mod download -json "$mod@$ver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
  lic=""
  for f in LICENSE LICENSE.txt LICENSE.md LICENCE COPYING LICENSE-APACHE License; do
    if [ -f "$dir/$f" ]; then lic=$dir/$f; break; fi
  done
  [ -n "$lic" ] || { echo "copyright.sh: $mod $ver has no licence file in $dir" >&2; exit 1; }
  printf '\n---- %s %s ----\n\n' "$mod" "$ver"
  if grep -q 'Apache License' "$lic" && grep -q 'Version 2.0, January 2004' "$lic"; then
    # Debian's common licences hold the text; the module's own notice,
    # if it has one, is what is its own.
    echo "Licensed under the Apache License, Version 2.0; on Debian systems, its full"
    echo "text is in /usr/share/common-licenses/Apache-2.0."
    if [ -f "$dir/NOTICE" ]; then echo; cat "$dir/NOTICE"; fi
  else
    cat "$lic"
  fi
done
