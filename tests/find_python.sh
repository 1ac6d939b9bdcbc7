# Sourced by the tests that compare with PyTorch: find_python MODULES... sets $python to the
# first interpreter that imports every module (GC_TEST_PYTHON first, e.g. a venv's; then
# python3 on PATH; then Debian's /usr/bin/python3, where python3-torch installs), or to ''.
find_python() {
    local imports candidate
    imports=$(IFS=,; echo "import $*")
    python=
    for candidate in ${GC_TEST_PYTHON:-} python3 /usr/bin/python3; do
        if command -v "$candidate" >/dev/null && "$candidate" -c "$imports" 2>/dev/null; then
            python=$candidate
            return
        fi
    done
}
