import Foundation
import MidtierJSON
import Testing

/// The one JSON writer: what it writes for every kind of value, and the building helpers the
/// answers use.
@Suite struct JSONWriterTests {
    @Test func writesEveryKindCompactly() {
        let value: JSON = ["b": true, "n": 15, "s": "a/b", "a": [nil, false, .number(-2.5)], "o": [:], "e": []]
        #expect(value.serialized() == #"{"b":true,"n":15,"s":"a/b","a":[null,false,-2.5],"o":{},"e":[]}"#)
    }

    @Test func escapesAsRFC8259Requires() {
        let text = "quote\" backslash\\ newline\n return\r tab\t nul\u{00} unit\u{1F} é 😀"
        #expect(JSON.string(text).serialized() == #""quote\" backslash\\ newline\n return\r tab\t nul\u0000 unit\u001f é 😀""#)
    }

    @Test func numbersFromDoublesAreJSONNumbers() {
        #expect(JSON.number(15.0).serialized() == "15")
        #expect(JSON.number(-0.5).serialized() == "-0.5")
        #expect(JSON.number(Double.infinity) == .null)
        #expect(JSON.number(Double.nan) == .null)
        #expect(JSON.number(Int64.max).serialized() == "9223372036854775807")
    }

    @Test func sortsByBytesAtEveryLevel() {
        let value: JSON = ["b": ["z": 1, "a": 2], "a": [["y": 1, "x": 2]], "B": 0]
        #expect(value.sortedByKey.serialized() == #"{"B":0,"a":[{"x":2,"y":1}],"b":{"a":2,"z":1}}"#)
        // By bytes: e + U+0301 (0x65 …) before f before é (0xC3 0xA9), two members though alike.
        let alike = JSON.object([JSONMember(key: "\u{E9}", value: 1), JSONMember(key: "e\u{301}", value: 2), JSONMember(key: "f", value: 3)])
        #expect(Array(alike.sortedByKey.serialized().utf8) == Array("{\"e\u{301}\":2,\"f\":3,\"\u{E9}\":1}".utf8))
    }

    @Test func prettyPrintsForPeople() {
        let value: JSON = ["a": [1, 2], "b": [:], "c": ["d": "x"]]
        #expect(value.prettyPrinted() == "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {},\n  \"c\": {\n    \"d\": \"x\"\n  }\n}\n")
    }

    /// Members are found by their exact bytes: a key written e + U+0301 is not the key é.
    @Test func looksUpMembersByExactBytes() {
        let value = JSON.object([JSONMember(key: "\u{E9}", value: 1), JSONMember(key: "e\u{301}", value: 2)])
        #expect(value["\u{E9}"] == .number("1"))
        #expect(value["e\u{301}"] == .number("2"))
        #expect(value["x"] == nil)
        #expect(JSON.string("é")["é"] == nil)
    }

    /// The strict reader takes two keys that are the same text in another normalization for one
    /// key written twice, and refuses the document: which one was meant is not clear.
    @Test func theReaderRefusesKeysThatDifferOnlyInNormalization() {
        guard case .failure(let error) = StrictJSON.value(Array("{\"\u{E9}\":1,\"e\u{301}\":2}".utf8)) else {
            Issue.record("accepted")
            return
        }
        #expect(error.message.contains("appears twice"))
    }

    @Test func roundTripsThroughTheStrictReader() throws {
        let text = #"{"n":8,"f":-1.5e2,"a":[true,null,"x\u0000"],"o":{"k":"v"}}"#
        let value = try StrictJSON.value(Array(text.utf8)).get()
        #expect(value.serialized() == #"{"n":8,"f":-1.5e2,"a":[true,null,"x\u0000"],"o":{"k":"v"}}"#)
        #expect(value["f"]?.doubleValue == -150)
    }

    @Test func refusesWhatIsNotStrictJSON() {
        for bad in [#"{"a":1,}"#, "{'a':1}", #"{"a":1,"a":2}"#, #"{"n":1e999}"#, "", "[1] 2"] {
            guard case .failure(let error) = StrictJSON.value(Array(bad.utf8)) else {
                Issue.record("\(bad) was accepted")
                continue
            }
            #expect(!error.message.isEmpty)
        }
        guard case .failure(let error) = StrictJSON.object(Array("[1]".utf8)) else {
            Issue.record("an array was accepted as an object")
            return
        }
        #expect(error.message.contains("an array, not an object"))
    }

    @Test func decodesAndEncodesThroughCodable() throws {
        struct Claims: Codable { var claims: JSON }
        // As jwt-kit hands a token's claims over: through Foundation's decoder.
        let decoded = try JSONDecoder().decode(
            Claims.self, from: Data(#"{"claims":{"exp":1700000000,"aud":["a","b"],"ratio":0.5,"ok":true,"no":null}}"#.utf8)
        ).claims
        #expect(decoded["exp"] == .number("1700000000"))
        #expect(decoded["aud"] == ["a", "b"])
        #expect(decoded["ratio"]?.doubleValue == 0.5)
        #expect(decoded["ok"] == true)
        #expect(decoded["no"] == .null)
        let encoded = try JSONEncoder().encode(Claims(claims: ["n": 3, "s": "x"]))
        #expect(try JSONDecoder().decode(Claims.self, from: encoded).claims.sortedByKey == ["n": 3, "s": "x"])
    }
}
