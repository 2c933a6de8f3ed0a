import NotifBusProtocol
import Testing

// CategoryRegistry on its own: every rule of a `didReceive` action against the categories.
@testable import NotifBusCore

struct CategoryRegistryTests {
    static func registry() throws -> CategoryRegistry {
        CategoryRegistry(set: try CategorySet.parse(Array(inviteAndMessage.utf8)))
    }

    @Test func actionsAreJudgedByTheCategoriesInForce() throws {
        let r = try CategoryRegistryTests.registry()
        let defaultAction = ProfilePayload.defaultActionIdentifier, dismiss = ProfilePayload.dismissActionIdentifier
        #expect(r.check(defaultAction, hasUserText: false, categoryID: nil) == .success(true))
        #expect(r.check(defaultAction, hasUserText: true, categoryID: nil) == .failure(.userTextWithoutTextInput))
        #expect(r.check(dismiss, hasUserText: false, categoryID: "MESSAGE") == .success(false))
        #expect(r.check(dismiss, hasUserText: false, categoryID: "INVITE") == .failure(.dismissWithoutCustomDismiss))
        #expect(r.check("ACCEPT", hasUserText: false, categoryID: "INVITE") == .success(true))
        #expect(r.check("DECLINE", hasUserText: false, categoryID: "INVITE") == .success(false))
        #expect(r.check("ACCEPT", hasUserText: false, categoryID: "NOPE") == .failure(.unknownCategory(action: "ACCEPT", category: "NOPE")))
        #expect(r.check("ACCEPT", hasUserText: false, categoryID: nil) == .failure(.unknownCategory(action: "ACCEPT", category: nil)))
        #expect(r.check("REPLY", hasUserText: false, categoryID: "INVITE") == .failure(.unknownAction(action: "REPLY", category: "INVITE")))
        #expect(r.check("REPLY", hasUserText: false, categoryID: "MESSAGE") == .failure(.textInputRequired(action: "REPLY")))
        #expect(r.check("ACCEPT", hasUserText: true, categoryID: "INVITE") == .failure(.textInputNotAllowed(action: "ACCEPT")))
        #expect(
            CategoryRegistry().check("ACCEPT", hasUserText: false, categoryID: "INVITE")
                == .failure(.unknownCategory(action: "ACCEPT", category: "INVITE")))
    }
}
