# Sourced by scripts/setup*.sh. ensure_venv DIR REQUIREMENTS WHAT: creates
# DIR with Debian's python3 (the extension module builds against the
# python3-dev headers) and installs REQUIREMENTS into it unless a stamp
# shows they are installed already.
ensure_venv() {
  local dir=$1 reqs=$2 what=$3
  local stamp=$dir/.requirements.stamp
  if [ ! -x "$dir/bin/python" ]; then
    echo "setup: creating $dir"
    /usr/bin/python3 -m venv "$dir"
  fi
  if [ ! -f "$stamp" ] || ! cmp -s "$reqs" "$stamp"; then
    echo "setup: installing $what into $dir ($reqs)"
    "$dir/bin/pip" install -q --disable-pip-version-check -r "$reqs"
    cp "$reqs" "$stamp"
  fi
}
