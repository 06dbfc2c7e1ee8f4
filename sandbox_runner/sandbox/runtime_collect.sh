#!/bin/bash
# Makes planrun's runtime: python3 and its standard library, bash, rg, ctags and git from
# planrun's Debian sandbox image, with every shared library they load and glibc's dynamic
# loader, under one directory that runs on any x86-64 or arm64 Linux image.
#
# Each program's ELF interpreter is rewritten to the loader in the runtime, and its
# DT_RPATH (not RUNPATH: RPATH is searched before LD_LIBRARY_PATH, so an image's own
# LD_LIBRARY_PATH cannot swap planrun's libraries) to the runtime's lib directory. Nothing
# else changes: no LD_LIBRARY_PATH is set anywhere, so the image's own programs keep
# loading the image's own libraries.
#
# Run as root in a stage FROM planrun's sandbox image: runtime_collect.sh RUNTIME [DEB...]
# (the .deb files, patchelf's, are installed first when patchelf is missing).
set -euo pipefail
runtime=$1
shift
if ! command -v patchelf >/dev/null; then
    if [ "$#" -gt 0 ]; then
        dpkg -i "$@" >/dev/null
    else
        apt-get update -qq && apt-get install -y -qq --no-install-recommends patchelf >/dev/null
    fi
fi

# bin/ holds the tool server's python, tools/ what commands may use (searched after the
# image's own PATH): planrun's python is no command's python3.
mkdir -p "$runtime/bin" "$runtime/tools" "$runtime/lib"
python=$(readlink -f "$(command -v python3)")
version=$(basename "$python")                        # python3.11
cp "$python" "$runtime/bin/$version"
ln -s "$version" "$runtime/bin/python3"
cp -a "/usr/lib/$version" "$runtime/lib/$version"
# What the tool server never imports: tests, GUI toolkits, pip's bootstrap, 2to3.
for unused in test idlelib tkinter turtledemo ensurepip lib2to3 distutils/tests \
              unittest/test sqlite3/test ctypes/test config-3.*; do
    rm -rf "$runtime/lib/$version/"$unused
done
find "$runtime/lib/$version" -name '*.exe' -delete

for tool in bash rg ctags git; do
    cp "$(readlink -f "$(command -v "$tool")")" "$runtime/tools/$tool"
done

loader=$(patchelf --print-interpreter "$runtime/bin/$version")
cp "$loader" "$runtime/lib/$(basename "$loader")"
# The closure of shared libraries: each line of ldd's "name => /path (address)".
elves=("$runtime"/bin/* "$runtime"/tools/* "$runtime/lib/$version/lib-dynload/"*.so)
for elf in "${elves[@]}"; do
    [ -L "$elf" ] && continue
    ldd "$elf" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
    cp -L "$path" "$runtime/lib/$name"
done

for program in "$runtime"/bin/* "$runtime"/tools/*; do
    [ -L "$program" ] && continue
    patchelf --set-interpreter "$runtime/lib/$(basename "$loader")" \
             --force-rpath --set-rpath '$ORIGIN/../lib' "$program"
done
for module in "$runtime/lib/$version/lib-dynload/"*.so; do
    patchelf --force-rpath --set-rpath '$ORIGIN/../..' "$module"
done
chmod -R a+rX,go-w "$runtime"
"$runtime/bin/python3" -I -S -c 'import json, ssl, subprocess, zlib' # every part loads
