package import HTTPTypes

extension HTTPFields {
    /// How many fields named `name` there are, counted without making the array of their
    /// values that `self[values:]` makes.
    package func count(of name: HTTPField.Name) -> Int {
        var count = 0
        for field in self where field.name == name { count += 1 }
        return count
    }
}
