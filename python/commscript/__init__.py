"""commscript from Python: run a recipe on the communicator a program already has.

    import commscript
    rep = commscript.run("env_audit", comm=my_mpi4py_comm, options={"--max": "1M"})
    if rep.exit_code != 0: ...

A thin ctypes layer over libcommscript's C API (include/commscript/commscript.h); no build step.
Runs are collective: every rank of `comm` calls run() with the same arguments. See
docs/embedding.md.
"""
import ctypes
import ctypes.util
import json
import os

__all__ = ["run", "Report", "Session", "CommscriptError", "library_version", "api_version"]

CS_OK = 0
_ERRORS = {-1: "invalid argument", -2: "not found", -3: "MPI", -4: "state", -5: "backend", -70: "internal"}


class CommscriptError(RuntimeError):
    """A call the API refused (bad arguments, unknown recipe, bad options, a null communicator)."""

    def __init__(self, code, message):
        super().__init__(message or _ERRORS.get(code, "error %d" % code))
        self.code = code


def _find_library():
    cands = []
    if os.environ.get("COMMSCRIPT_LIBRARY"):
        cands.append(os.environ["COMMSCRIPT_LIBRARY"])
    here = os.path.dirname(os.path.abspath(__file__))
    # Installed: <prefix>/<libdir>/commscript/python/commscript/__init__.py -> <prefix>/<libdir>/libcommscript.so
    cands.append(os.path.normpath(os.path.join(here, "..", "..", "..", "libcommscript.so")))
    found = ctypes.util.find_library("commscript")
    if found:
        cands.append(found)
    for c in cands:
        if c and (os.path.exists(c) or not os.path.isabs(c)):
            try:
                return ctypes.CDLL(c, mode=ctypes.RTLD_GLOBAL)
            except OSError:
                continue
    raise ImportError("libcommscript not found: set COMMSCRIPT_LIBRARY to the path of libcommscript.so")


_lib = _find_library()


class _Options(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_int), ("recipe_path", ctypes.c_char_p), ("out_dir", ctypes.c_char_p),
                ("trusted", ctypes.c_int), ("deadline_s", ctypes.c_double), ("seed", ctypes.c_uint64),
                ("seed_given", ctypes.c_int), ("init_mpi", ctypes.c_int),
                # API 1.1
                ("backend", ctypes.c_char_p), ("launcher", ctypes.c_char_p), ("verify", ctypes.c_int),
                ("own_process", ctypes.c_int)]


_vp, _cp, _int = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
_lib.cs_api_version.restype = _int
_lib.cs_version.restype = _cp
_lib.cs_session_options_init.argtypes = [ctypes.POINTER(_Options)]
_lib.cs_session_open.argtypes = [ctypes.POINTER(_Options), ctypes.POINTER(_vp)]
_lib.cs_session_attach_comm_f.argtypes = [_vp, ctypes.c_int64]
_lib.cs_last_error.argtypes = [_vp]
_lib.cs_last_error.restype = _cp
_lib.cs_session_mpi_info.argtypes = [_vp, ctypes.POINTER(_int), ctypes.POINTER(_int)]
_lib.cs_run.argtypes = [_vp, _cp, ctypes.POINTER(_cp), _int, ctypes.POINTER(_cp), _int, _cp, _cp, ctypes.POINTER(_vp)]
for f, t in (("cs_result_exit_code", _int), ("cs_result_report_json", _cp), ("cs_result_out_dir", _cp),
             ("cs_result_error", _cp)):
    getattr(_lib, f).argtypes = [_vp]
    getattr(_lib, f).restype = t
_lib.cs_result_free.argtypes = [_vp]
_lib.cs_last_exit_code.argtypes = [_vp]
_lib.cs_last_exit_code.restype = _int
_lib.cs_session_attach_world.argtypes = [_vp, _vp, _vp, _vp]
_lib.cs_session_close.argtypes = [_vp]


def library_version():
    return _lib.cs_version().decode()


def api_version():
    return _lib.cs_api_version()


def _b(s):
    return None if s is None else os.fsencode(s) if isinstance(s, os.PathLike) else str(s).encode()


class Report:
    """One finished run. exit_code follows the command line's contract (0 ok, 1 bad input, 2 recipe
    error, 3 verdict failed, 4 corruption, 5 timeout/hang); `doc` is report.json as a dict."""

    def __init__(self, exit_code, doc, out_dir, error):
        self.exit_code, self.doc, self.out_dir, self.error = exit_code, doc, out_dir, error

    @property
    def ok(self):
        return self.exit_code == 0

    @property
    def findings(self):
        return self.doc.get("findings", [])

    @property
    def scorecard(self):
        return self.doc.get("scorecard", {})

    @property
    def results(self):
        return self.doc.get("results", [])

    @property
    def incidents(self):
        return self.doc.get("incidents", [])

    def __repr__(self):
        return "Report(exit_code=%d, findings=%d, out_dir=%r)" % (self.exit_code, len(self.findings), self.out_dir)


def _fortran_handle(comm):
    if comm is None:
        return None
    if isinstance(comm, int):
        return comm
    if hasattr(comm, "py2f"):  # mpi4py.MPI.Comm
        return comm.py2f()
    raise TypeError("comm must be an mpi4py communicator, a Fortran handle (int) or None, not %r" % type(comm))


class Session:
    """Options that several runs share, and the communicator they run on (None: MPI_COMM_WORLD)."""

    def __init__(self, comm=None, recipe_path=None, out=None, trusted=False, deadline=None, seed=None, backend=None,
                 launcher=None, verify=True):
        """backend: "mpi" (default), "gloo" (connected over `comm`, or with launcher="env" at MASTER_ADDR:MASTER_PORT
        from RANK/WORLD_SIZE without MPI) or "nccl" (unique id over `comm`). launcher: join the world the launcher
        started instead of `comm` ("auto", "mpi", "env", "slurm")."""
        if _lib.cs_api_version() < 10100 and (backend or launcher or not verify):
            raise CommscriptError(-1, "backend, launcher and verify need libcommscript API 1.1")
        o = _Options()
        _lib.cs_session_options_init(ctypes.byref(o))
        self._keep = [_b(recipe_path), _b(out), _b(backend), _b(launcher)]
        o.recipe_path, o.out_dir, o.backend, o.launcher = self._keep
        o.verify = 1 if verify else 0
        if launcher is not None and comm is not None:
            raise CommscriptError(-1, "give comm or launcher, not both")
        if launcher is not None and backend == "gloo" and launcher != "mpi":
            o.init_mpi = 0  # a Gloo world from the launcher's variables needs no MPI
        o.trusted = 1 if trusted else 0
        if deadline is not None:
            o.deadline_s = float(deadline)
        if seed is not None:
            o.seed, o.seed_given = int(seed), 1
        h = _vp()
        rc = _lib.cs_session_open(ctypes.byref(o), ctypes.byref(h))
        if rc != CS_OK:
            raise CommscriptError(rc, _lib.cs_last_error(None).decode())
        self._h = h
        if launcher is not None:
            rc = _lib.cs_session_attach_world(self._h, None, None, None)  # no plan: the session's backend
            if rc != CS_OK:
                msg = _lib.cs_last_error(self._h).decode()
                self.close()
                raise CommscriptError(rc, msg)
        f = _fortran_handle(comm)
        if f is not None:
            rc = _lib.cs_session_attach_comm_f(self._h, f)
            if rc != CS_OK:
                msg = _lib.cs_last_error(self._h).decode()
                self.close()
                raise CommscriptError(rc, msg)

    def mpi_info(self):
        by_host, level = _int(), _int()
        _lib.cs_session_mpi_info(self._h, ctypes.byref(by_host), ctypes.byref(level))
        return {"initialized_by_host": bool(by_host.value), "thread_level": level.value}

    def run(self, recipe, options=None, sets=None, config=None, out=None):
        args = []
        for k, v in (options or {}).items():
            k = str(k)
            if not k.startswith("-"):
                k = "--" + k
            if v is None:  # left out: the recipe's default
                continue
            if isinstance(v, bool):  # a flag: --check, --check=false (a separate "False" was a stray argument)
                args.append(k if v else k + "=false")
            elif isinstance(v, (list, tuple)):
                args += [k, ",".join(str(x) for x in v)]
            else:
                args += [k, str(v)]
        setl = ["%s=%s" % (k, v) for k, v in (sets or {}).items()]
        argv = (_cp * max(1, len(args)))(*[_b(a) for a in args])
        setv = (_cp * max(1, len(setl)))(*[_b(a) for a in setl])
        res = _vp()
        rc = _lib.cs_run(self._h, _b(recipe), argv, len(args), setv, len(setl), _b(config), _b(out), ctypes.byref(res))
        if rc != CS_OK:
            raise CommscriptError(rc, _lib.cs_last_error(self._h).decode())
        try:
            text = _lib.cs_result_report_json(res).decode()
            return Report(_lib.cs_result_exit_code(res), json.loads(text) if text else {},
                          _lib.cs_result_out_dir(res).decode(), _lib.cs_result_error(res).decode())
        finally:
            _lib.cs_result_free(res)

    def close(self):
        if getattr(self, "_h", None):
            _lib.cs_session_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def run(recipe, comm=None, options=None, out=None, sets=None, config=None, trusted=False, deadline=None, seed=None,
        backend=None, launcher=None):
    """Runs `recipe` (a bundled name or a file) on `comm` (an mpi4py communicator; None: the world)
    and returns its Report. options: the recipe's options ({"max": "1M", "ops": ["allreduce"]});
    sets: config overrides ({"run.timeout": 10}); out: the output directory; backend: "mpi" (default),
    "gloo" or "nccl" (see Session). A collective."""
    with Session(comm=comm, trusted=trusted, deadline=deadline, seed=seed, backend=backend, launcher=launcher) as s:
        return s.run(recipe, options=options, sets=sets, config=config, out=out)
