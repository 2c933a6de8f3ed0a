// Fixture for scripts/lib/layering.py --self-test: everything forbidden appears only in
// comments and strings, so nothing here breaks a rule. import CLibevent; read(fd); Date()
import Glibc

/* A block comment /* nested */ with socket(AF_UNIX) and clock_gettime(x) in it. */
let help = "call read(fd, buffer, n) or import Foundation"
let script = """
    import socket
    write(1, "x")
    """
let raw = #"socket("\#(help)") and "quotes" inside"#
let interpolated = "length \(help.utf8.count) and \("read(" + "x")"
