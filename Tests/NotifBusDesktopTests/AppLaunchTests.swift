// Starting the app without D-Bus or processes: reading desktop files (groups, escapes,
// localized names, lookup paths), turning Exec lines into argument vectors as the Desktop
// Entry Specification says, and the start/join/hand-over rule of AppStarts.
import NotifBusDesktop
import Testing

@Suite struct DesktopEntryTests {
    static let mail = """
        # written by hand
        [Desktop Entry]
        Type=Application
        Name=Mail
        Name[de]=Post
        Name[sr_RS@latin]=Pošta
        Name[sr]=Пошта
        Icon=org.example.Mail
        Exec=mail-app --new-window %U
        DBusActivatable=true
        Comment=Read\\syour\\tmail\\nnow

        [Desktop Action compose]
        Name=Compose
        Exec=mail-app --compose
        """

    @Test func theMainGroupIsRead() throws {
        let e = try DesktopEntry(parsing: Self.mail, id: "org.example.Mail", path: "/a/org.example.Mail.desktop", locale: nil)
        #expect(e.name == "Mail" && e.icon == "org.example.Mail" && e.exec == "mail-app --new-window %U")
        #expect(e.dbusActivatable && !e.terminal && !e.hidden && e.tryExec == nil && e.workingDirectory == nil)
    }

    @Test func theNameFollowsTheLocaleAsTheSpecOrdersIt() throws {
        func name(_ locale: String?) throws -> String {
            try DesktopEntry(parsing: Self.mail, id: "m", path: "/m.desktop", locale: locale).name
        }
        #expect(try name("de_DE.UTF-8") == "Post")
        #expect(try name("sr_RS.UTF-8@latin") == "Pošta")
        #expect(try name("sr_RS") == "Пошта")
        #expect(try name("fr_FR.UTF-8") == "Mail")
        #expect(try name("C") == "Mail")
        #expect(DesktopEntry.localeCandidates("sr_RS.UTF-8@latin") == ["sr_RS@latin", "sr_RS", "sr@latin", "sr"])
    }

    @Test func stringEscapesAreUndoneAndOthersKeptForExec() throws {
        let text = "[Desktop Entry]\nType=Application\nName=A\\sB\nExec=sh -c \"echo \\\\$HOME\"\n"
        let e = try DesktopEntry(parsing: text, id: "a", path: "/a.desktop", locale: nil)
        #expect(e.name == "A B")
        #expect(e.exec == "sh -c \"echo \\$HOME\"")
    }

    @Test func badFilesAreRefusedWithTheReason() {
        let cases: [(String, String)] = [
            ("[Desktop Entry]\nType=Link\nName=x", "its Type is Link, not Application"),
            ("[Desktop Entry]\nName=x", "it has no Type key"),
            ("[Desktop Entry]\nType=Application", "it has no Name"),
            ("Name=x\n[Desktop Entry]", "line 1: a key before the [Desktop Entry] group"),
            ("[Other]\nName=x", "line 1: the first group is [Other], not [Desktop Entry]"),
            ("[Desktop Entry]\nType=Application\nName=a\nName=b", "line 4: key Name is given twice"),
            ("[Desktop Entry]\nType=Application\nName=a\nDBusActivatable=yes", "DBusActivatable=yes is not a boolean (true or false)"),
            ("[Desktop Entry]\nType=Application\nName=a\nbad key=1", "line 4: 'bad key' is not a valid key"),
            ("", "it has no [Desktop Entry] group"),
        ]
        for (text, reason) in cases {
            #expect(throws: DesktopEntryError(reason)) { try DesktopEntry(parsing: text, id: "x", path: "/x", locale: nil) }
        }
    }

    @Test func aHiddenEntryNeedsNothingElse() throws {
        #expect(try DesktopEntry(parsing: "[Desktop Entry]\nHidden=true", id: "x", path: "/x", locale: nil).hidden)
    }

    @Test func idsThatCouldLeaveTheFoldersAreRefused() {
        for good in ["org.example.Mail", "firefox-esr", "a_b"] { #expect(DesktopEntry.isValidID(good), "\(good)") }
        for bad in ["", "../x", "a/b", ".hidden", "-x", "a b", "x\u{0}"] { #expect(!DesktopEntry.isValidID(bad), "\(bad)") }
        #expect(DesktopEntry.isBusName("org.example.Mail") && DesktopEntry.isBusName("org._7_zip.Archiver"))
        for bad in ["firefox", "org.7zip.A", "org..a", "org.a.b!"] { #expect(!DesktopEntry.isBusName(bad), "\(bad)") }
        #expect(DesktopEntry.objectPath(forBusName: "org.example.Mail-App") == "/org/example/Mail_App")
    }

    @Test func lookupPathsFollowTheXDGFolders() {
        #expect(
            DesktopEntry.applicationFolders(dataHome: nil, dataDirs: nil, home: "/home/u")
                == ["/home/u/.local/share/applications", "/usr/local/share/applications", "/usr/share/applications"])
        #expect(
            DesktopEntry.applicationFolders(dataHome: "/d/h/", dataDirs: "/x:relative:/y/:/x", home: "/home/u")
                == ["/d/h/applications", "/x/applications", "/y/applications"])
        let folders: Set<String> = ["org", "org/example", "foo"]
        #expect(
            DesktopEntry.relativePaths(for: "org-example-Mail", isFolder: folders.contains)
                == ["org-example-Mail.desktop", "org/example-Mail.desktop", "org/example/Mail.desktop"])
        #expect(DesktopEntry.relativePaths(for: "org.example.Mail", isFolder: folders.contains) == ["org.example.Mail.desktop"])
    }
}

@Suite struct ExecCommandTests {
    func argv(_ exec: String, icon: String? = "mail") throws -> [String] {
        try ExecCommand(exec: exec, name: "Mail App", icon: icon, location: "/apps/m.desktop").arguments
    }

    @Test func fieldCodesAreExpandedOrRemoved() throws {
        #expect(try argv("mail-app %U --x") == ["mail-app", "--x"])
        #expect(try argv("mail-app %f %F %u %d %D %n %N %v %m") == ["mail-app"])
        #expect(
            try argv("mail-app %i --name=%c --from %k 100%%") == [
                "mail-app", "--icon", "mail", "--name=Mail App", "--from", "/apps/m.desktop", "100%",
            ])
        #expect(try argv("mail-app %i", icon: nil) == ["mail-app"])
        #expect(try argv("mail-app --file=%f") == ["mail-app", "--file="])
    }

    @Test func quotingIsUndone() throws {
        #expect(try argv(#"sh -c "echo \"a b\" \$HOME \`x\` \\ %U""#) == ["sh", "-c", #"echo "a b" $HOME `x` \ %U"#])
        #expect(try argv(#""/opt/My App/bin/mail" --x"#) == ["/opt/My App/bin/mail", "--x"])
        #expect(try argv("  mail-app   --a\t--b  ") == ["mail-app", "--a", "--b"])
        #expect(try argv(#"mail-app """#) == ["mail-app", ""])
    }

    @Test func badLinesAreRefused() {
        let cases: [(String, String)] = [
            ("", "Exec names no program"),
            ("%U", "Exec names no program"),
            (#"mail "unclosed"#, "Exec: a quoted argument is not closed"),
            (#"mail --x="a""#, "Exec: a quote inside an unquoted argument (an argument is quoted in whole)"),
            (#"mail "a"b"#, "Exec: text right after a closing quote"),
            ("mail %z", "Exec: unknown field code %z in '%z'"),
            ("mail --x=%F", "Exec: field code %F must be an argument of its own, not part of '--x=%F'"),
            ("mail 5%", "Exec: '5%' ends with a lone %"),
            ("bin/mail", "Exec: the program 'bin/mail' is neither an absolute path nor a name to look up in PATH"),
            ("A=1 mail", "Exec: the program 'A=1' contains '=', which the spec does not allow"),
        ]
        for (exec, reason) in cases {
            #expect(throws: DesktopEntryError(reason), "\(exec)") { try argv(exec) }
        }
    }
}

@Suite struct AppStartsTests {
    @Test func aKeptClickStartsTheAppAndTheClicksMeanwhileAreHandedOver() {
        var s = AppStarts(timeoutMs: 10_000)
        let first = s.take()
        #expect(s.posted(first, retainedForLaunch: true, appObserving: false, now: 100) == .start(deadline: 10_100))
        // Nineteen more clicks while it starts: they wait.
        for _ in 0..<19 { _ = s.take() }
        #expect(s.tick(now: 5_000) == .stillStarting)
        #expect(s.observed() == .handedOver(held: 19))
        #expect(s.phase == .idle)
        // Handed over, they reach the app's observer; one it passes on starts nothing.
        #expect(s.posted(first + 1, retainedForLaunch: true, appObserving: true, now: 5_100) == .notStarted(.appObserving))
        #expect(s.posted(first + 2, retainedForLaunch: false, appObserving: true, now: 5_100) == .postNext)
    }

    @Test func aFailedStartIsNotRetriedForTheClicksThatJoinedIt() {
        var s = AppStarts(timeoutMs: 10_000)
        let first = s.take()
        _ = s.posted(first, retainedForLaunch: true, appObserving: false, now: 0)
        let joined = [s.take(), s.take()]
        #expect(s.failed("Exec: mail-app not found") == .failed(reason: "Exec: mail-app not found", held: 2))
        for n in joined {
            #expect(s.posted(n, retainedForLaunch: true, appObserving: false, now: 10) == .notStarted(.joinedFailedStart))
        }
        // A click after the failure tries again.
        let later = s.take()
        #expect(s.posted(later, retainedForLaunch: true, appObserving: false, now: 20) == .start(deadline: 10_020))
        #expect(s.tick(now: 10_019) == .stillStarting)
        #expect(s.tick(now: 10_020) == .failed(reason: "the app did not observe didReceive within 10 s", held: 0))
        // Reports after the start ended change nothing.
        #expect(s.observed() == .stillStarting && s.failed("late") == .stillStarting)
    }

    @Test func clicksNothingKeptStartNothing() {
        var s = AppStarts(timeoutMs: 1_500)
        #expect(s.posted(s.take(), retainedForLaunch: false, appObserving: false, now: 0) == .postNext)
        #expect(s.posted(s.take(), retainedForLaunch: true, appObserving: true, now: 0) == .notStarted(.appObserving))
        #expect(s.posted(s.take(), retainedForLaunch: true, appObserving: false, now: 0) == .start(deadline: 1_500))
        #expect(s.tick(now: 1_500) == .failed(reason: "the app did not observe didReceive within 1500 ms", held: 0))
    }
}
