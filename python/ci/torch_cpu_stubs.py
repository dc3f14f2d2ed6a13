"""Lets the CUDA build of torch that PyPI ships import and run on the CPU without its NVIDIA
wheels (several GB that CI would download for nothing).

PyPI's Linux x86_64 torch wheel links its libraries against the CUDA libraries (libcudart,
libcublas, libcudnn, ...) that its `nvidia-*`/`cuda-toolkit` dependencies provide, so
`pip install torch --no-deps` leaves `import torch` failing on the missing shared objects. This
script builds one small stand-in for each missing library, with the library's soname, symbol
versions and every symbol torch's libraries take from it, and puts them in `torch/lib` (on the
libraries' RUNPATH). Each stand-in function returns 100 (`cudaErrorNoDevice`), so torch sees a
machine without a GPU: `torch.cuda.is_available()` is False and every CPU operation is the real
one. Needs `readelf` and a C compiler. Usage: python torch_cpu_stubs.py SITE_PACKAGES/torch
"""

import os
import re
import subprocess
import sys
import tempfile


def run(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def needed(lib):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run("readelf", "-d", "-W", lib))


def version_files(lib):
    """Version index -> the file the version is required from."""
    out, files, current = run("readelf", "-V", "-W", lib), {}, None
    for line in out.splitlines():
        m = re.search(r"File: (\S+)", line)
        if m:
            current = m.group(1)
        m = re.search(r"Name: (\S+)\s+Flags: \S+\s+Version: (\d+)", line)
        if m and current:
            files[m.group(2)] = (current, m.group(1))
    return files


def symbols(lib):
    """(defined names, undefined [(name, type, version index or None)]) of a library."""
    defined, undefined = set(), []
    pat = re.compile(r"^\s*\d+:\s+\S+\s+\d+\s+(\w+)\s+(\w+)\s+\w+\s+(\w+)\s+(\S+)(?:\s+\((\d+)\))?")
    for line in run("readelf", "--dyn-syms", "-W", lib).splitlines():
        m = pat.match(line)
        if not m:
            continue
        kind, bind, ndx, name, ver = m.groups()
        base = name.split("@")[0]
        if ndx != "UND":
            defined.add(base)
        elif bind != "WEAK" and base:
            undefined.append((base, kind, ver))
    return defined, undefined


def system_path(soname):
    m = re.search(rf"\s{re.escape(soname)} \(.*\) => (\S+)", run("ldconfig", "-p"))
    return m.group(1) if m else None


def main(torch_dir):
    lib_dir = os.path.join(torch_dir, "lib")
    libs = [os.path.join(lib_dir, f) for f in os.listdir(lib_dir) if ".so" in f]
    libs += [os.path.join(torch_dir, f) for f in os.listdir(torch_dir) if f.endswith(".so")]
    present = set(os.listdir(lib_dir))
    missing = sorted({n for lib in libs for n in needed(lib)
                      if n not in present and system_path(n) is None})
    if not missing:
        print("torch_cpu_stubs: no missing libraries")
        return
    defined, wanted = set(), {m: {} for m in missing}
    system = {system_path(n) for lib in libs for n in needed(lib)} - {None}
    for lib in libs + sorted(system):
        d, _ = symbols(lib)
        defined |= d
    for lib in libs:
        files = version_files(lib)
        for name, kind, ver in symbols(lib)[1]:
            owner = files.get(ver)
            if owner and owner[0] in wanted:
                wanted[owner[0]].setdefault(owner[1], {})[name] = kind
            elif owner is None and name not in defined:
                # Unversioned and defined nowhere: any stand-in in the global scope serves.
                wanted[missing[0]].setdefault(None, {})[name] = kind
    made = []
    with tempfile.TemporaryDirectory() as tmp:
        for soname, versions in wanted.items():
            c = ["int sc_stub_no_device(void) { return 100; }"]
            script, k = [], 0
            for version, names in sorted(versions.items(), key=lambda v: v[0] or ""):
                for name, kind in sorted(names.items()):
                    k += 1
                    if kind == "OBJECT":
                        c.append(f'char sc_stub_{k}[256] __asm__("{name}");')
                    else:
                        c.append(f'int sc_stub_{k}(void) __asm__("{name}");')
                        c.append(f"int sc_stub_{k}(void) {{ return 100; }}")
                if version:
                    script.append(f"{version} {{ global: {'; '.join(sorted(names))}; }};")
            src = os.path.join(tmp, "stub.c")
            with open(src, "w") as f:
                f.write("\n".join(c) + "\n")
            cmd = ["cc", "-shared", "-fPIC", "-O0", "-o", os.path.join(lib_dir, soname),
                   f"-Wl,-soname,{soname}", src]
            if script:
                vs = os.path.join(tmp, "stub.map")
                with open(vs, "w") as f:
                    f.write("\n".join(script) + "\n")
                cmd.append(f"-Wl,--version-script={vs}")
            subprocess.run(cmd, check=True)
            made.append(f"{soname} ({k})")
    print(f"torch_cpu_stubs: stand-ins (symbols): {', '.join(made)}")


if __name__ == "__main__":
    main(sys.argv[1])
