// The notification categories in force and the check of a `didReceive` action against
// them. It only judges; storing a new set goes through a durable write (Broker+Writes.swift).
import NotifBusProtocol

/// The category set in force.
struct CategoryRegistry {
    var set = CategorySet.empty

    /// Checks a `didReceive` action against the categories, and says whether it launches
    /// the app.
    func check(_ action: String, hasUserText: Bool, categoryID: String?) -> Result<Bool, CategoryError> {
        let category = categoryID.flatMap { set.categories[$0] }
        if action == ProfilePayload.defaultActionIdentifier || action == ProfilePayload.dismissActionIdentifier {
            if hasUserText { return .failure(.userTextWithoutTextInput) }
            if action == ProfilePayload.defaultActionIdentifier { return .success(true) }
            guard category?.customDismissAction == true else { return .failure(.dismissWithoutCustomDismiss) }
            return .success(false)
        }
        guard let category, let categoryID else { return .failure(.unknownCategory(action: action, category: categoryID)) }
        guard let rule = category.actions[action] else { return .failure(.unknownAction(action: action, category: categoryID)) }
        if rule.textInput != hasUserText {
            return .failure(rule.textInput ? .textInputRequired(action: action) : .textInputNotAllowed(action: action))
        }
        return .success(rule.foreground)
    }
}
