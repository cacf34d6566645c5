/// What a page is rendered with: the page set's name and stylesheet, what the layout's header
/// shows (`layout`: the signed-in person, their CSRF token, a one-time notice) and the page's own
/// model. A template names their properties as they are; a name is looked up in the model
/// first, then in the layout, then in the frame (Mustache's context stack).
struct PageFrame<Layout: Sendable, Model: Sendable>: Sendable {
    let site: String
    let stylesheet: String
    let layout: Layout
    let page: Model
}

/// The layout of a page that shows nobody signed in (the sign-in forms).
package struct NoLayout: Sendable {
    package init() {}
}
