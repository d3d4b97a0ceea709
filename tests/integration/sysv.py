"""The shared table's System V segment, from the tests' side (ctypes on
libc): its key as the shim computes it (shtab.c), finding, attaching,
scribbling on, removing and re-owning it, and its lock file's path."""
import ctypes
import ctypes.util
import os
import struct

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.shmat.restype = ctypes.c_void_p
_libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
_libc.shmdt.argtypes = [ctypes.c_void_p]
_libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
_libc.shmctl.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]

IPC_RMID, IPC_SET, IPC_STAT = 0, 1, 2
IPC_CREAT, IPC_EXCL = 0o1000, 0o2000
LAYOUT = 3
MAGIC = 0x62736869667473
HEADER = 4096  # the table starts here
M64 = (1 << 64) - 1
GOLDEN = 0x9e3779b97f4a7c15


def _mix(x):
    x = (x + GOLDEN) & M64
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M64
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M64
    return x ^ (x >> 31)


def key(name="", uid=None, netns=None):
    """bs_shtab_key: the segment's key for a table name ("" or "user": the
    default table) of uid in a network namespace (this one)."""
    uid = os.geteuid() if uid is None else uid
    netns = os.stat("/proc/self/ns/net").st_ino if netns is None else netns
    name = "" if name in ("", "user") else name
    h = _mix(MAGIC ^ LAYOUT)
    h = _mix(h ^ uid)
    h = _mix(h ^ netns)
    for c in name.encode():
        h = _mix(h ^ c)
    k = h & 0x7fffffff
    return k or 1


def lock_path(k):
    return "/dev/shm/backoffshim-v%d-k%d.lock" % (LAYOUT, k)


class _Perm(ctypes.Structure):
    _fields_ = [("key", ctypes.c_int), ("uid", ctypes.c_uint), ("gid", ctypes.c_uint),
                ("cuid", ctypes.c_uint), ("cgid", ctypes.c_uint), ("mode", ctypes.c_ushort),
                ("pad1", ctypes.c_ushort), ("seq", ctypes.c_ushort), ("pad2", ctypes.c_ushort),
                ("unused1", ctypes.c_ulong), ("unused2", ctypes.c_ulong)]


class _Ds(ctypes.Structure):
    _fields_ = [("perm", _Perm), ("segsz", ctypes.c_size_t), ("atime", ctypes.c_long),
                ("dtime", ctypes.c_long), ("ctime", ctypes.c_long), ("cpid", ctypes.c_int),
                ("lpid", ctypes.c_int), ("nattch", ctypes.c_ulong), ("unused4", ctypes.c_ulong),
                ("unused5", ctypes.c_ulong)]


def find(k):
    """The segment's id, or None."""
    i = _libc.shmget(k, 0, 0)
    return None if i < 0 else i


def stat(i):
    ds = _Ds()
    if _libc.shmctl(i, IPC_STAT, ctypes.byref(ds)) != 0:
        raise OSError(ctypes.get_errno(), "shmctl IPC_STAT")
    return ds


def create(k, size, mode=0o600):
    i = _libc.shmget(k, size, IPC_CREAT | IPC_EXCL | mode)
    if i < 0:
        raise OSError(ctypes.get_errno(), "shmget")
    return i


def give_to(i, uid):
    """Hand the segment to another owner (root only)."""
    ds = stat(i)
    ds.perm.uid = uid
    if _libc.shmctl(i, IPC_SET, ctypes.byref(ds)) != 0:
        raise OSError(ctypes.get_errno(), "shmctl IPC_SET")


def remove(i):
    if _libc.shmctl(i, IPC_RMID, None) != 0:
        raise OSError(ctypes.get_errno(), "shmctl IPC_RMID")


def write(i, offset, data):
    """data written into the segment at offset."""
    p = _libc.shmat(i, None, 0)
    if p in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "shmat")
    try:
        ctypes.memmove(p + offset, data, len(data))
    finally:
        _libc.shmdt(p)


def read(i, offset, n):
    p = _libc.shmat(i, None, 0o10000)  # SHM_RDONLY
    if p in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "shmat")
    try:
        return ctypes.string_at(p + offset, n)
    finally:
        _libc.shmdt(p)


def header(i):
    magic, layout = struct.unpack("<QI", read(i, 0, 12))
    return magic, layout
