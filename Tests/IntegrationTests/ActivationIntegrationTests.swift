// Socket activation: a broker started the way systemd starts it (the listening socket
// on descriptor 3, LISTEN_FDS and LISTEN_PID set) serves that socket and leaves the file.
import Foundation
import Glibc
import Testing

@Suite(.ownThread, .timeLimit(.minutes(5))) struct ActivationIntegrationTests {
    @Test func brokerUsesThePassedSocket() throws {
        let folder = TempFolder()
        let path = folder.path + "/activated.sock"
        // Python stands in for systemd: bind, listen, move to fd 3, set the variables, exec.
        let launcher = """
            import os, socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(sys.argv[1]); s.listen(16)
            os.dup2(s.fileno(), 3); os.set_inheritable(3, True)
            os.environ["LISTEN_FDS"] = "1"; os.environ["LISTEN_PID"] = str(os.getpid())
            os.execv(sys.argv[2], [sys.argv[2], "broker"])
            """
        let broker = try Child(SystemPython.path, ["-c", launcher, path, Binaries.notifbus])
        #expect(broker.waitFor(.seconds(10)) { broker.stderr.contains("notifbus: listening on \(path)") }, "\(broker.stderr)")
        let client = try RawClient(path)
        try client.hello()
        #expect(client.request(#"{"op":"ping","id":1}"#)?["result"] == [:])
        broker.signal(SIGTERM)
        #expect(broker.waitExit() == 0)
        // systemd owns the socket file: the broker leaves it.
        #expect(FileManager.default.fileExists(atPath: path))
    }
}
