package import MidtierCore

extension SubjectPattern {
    /// The subject for one user (docs/forwarding.md, "`PrincipalPropagation`"): `${name}` is
    /// the `userIdSource` attribute (the user id when the destination names none),
    /// `${login_name}` the user id, any other `${x}` the user's attribute `x`.
    package func fill(
        userID: String, attributes: [String: String], userIdSource: String?
    ) throws(SubjectPatternError)
        -> [(type: AttributeType, value: String)]
    {
        try fill { variable in
            switch variable {
            case "name": userIdSource.map { attributes[$0] } ?? userID
            case "login_name": userID
            default: attributes[variable]
            }
        }
    }
}
