import Foundation

/// One entity instance: its type's name, its property values, and whose data it is.
struct ODataEntity: Sendable {
    let typeName: String
    let values: [String: ODataValue]
    /// The user this record belongs to; nil for reference data everyone may read (banks).
    let owner: String?

    subscript(property: String) -> ODataValue {
        values[property] ?? .null
    }
}

/// The payroll data as OData entities, with navigation and the "everyone in self" rule.
///
/// Visibility mimics a SuccessFactors tenant whose role-based permissions grant every employee
/// read access to their own data only ("Everyone" group, target "Self"): a user sees their own
/// `User`, `EmpEmployment`, `PaymentInformationV3`/`DetailV3` and payroll runs with items;
/// `Bank` is reference data readable by everyone. Records of others are simply absent: a query
/// naming them finds nothing and a key lookup answers 404, the same as for a key that does not
/// exist, so nothing reveals whether another user's record exists.
struct PayrollStore: Sendable {
    let model: ODataModel
    /// All entities per entity type name, sorted by key (the default order of a collection).
    private let entitiesByType: [String: [ODataEntity]]

    init(data: PayrollData, model: ODataModel = PayrollModel.model) {
        self.model = model
        var entities: [String: [ODataEntity]] = [:]
        entities["User"] = data.users.map(Self.entity(for:))
        entities["EmpEmployment"] = data.employments.map(Self.entity(for:))
        entities["PaymentInformationV3"] = data.paymentInformation.map(Self.entity(for:))
        entities["PaymentInformationDetailV3"] = data.paymentInformation.flatMap { info in
            info.details.map { Self.entity(for: $0, of: info) }
        }
        entities["Bank"] = data.banks.map(Self.entity(for:))
        entities["EmployeePayrollRunResults"] = data.payrollRuns.map(Self.entity(for:))
        entities["EmployeePayrollRunResultsItems"] = data.payrollRuns.flatMap { run in
            run.items.map { Self.entity(for: $0, of: run) }
        }
        for type in model.entityTypes {
            entities[type.name] = (entities[type.name] ?? []).sorted { Self.keyOrder($0, $1, keys: type.keys) }
        }
        self.entitiesByType = entities
    }

    func isVisible(_ entity: ODataEntity, to user: String) -> Bool {
        entity.owner == nil || entity.owner == user
    }

    /// The entities of a type the user may see, in key order.
    func entities(of type: ODataEntityType, visibleTo user: String) -> [ODataEntity] {
        (entitiesByType[type.name] ?? []).filter { isVisible($0, to: user) }
    }

    /// The entity with these key values, if the user may see it.
    func entity(of type: ODataEntityType, key: [String: ODataValue], visibleTo user: String) -> ODataEntity? {
        entities(of: type, visibleTo: user).first { entity in
            type.keys.allSatisfy { name in
                guard let wanted = key[name] else { return false }
                return ODataValue.compare(entity[name], wanted) == .orderedSame
            }
        }
    }

    /// The entities a navigation property leads to from `entity`, those the user may see only.
    func related(_ entity: ODataEntity, via navigation: ODataNavigation, visibleTo user: String) -> [ODataEntity] {
        let wanted = navigation.joins.map { entity[$0.source] }
        guard !wanted.contains(.null) else { return [] }
        return (entitiesByType[navigation.target] ?? []).filter { candidate in
            isVisible(candidate, to: user)
                && zip(navigation.joins, wanted).allSatisfy { join, value in candidate[join.target] == value }
        }
    }

    private static func keyOrder(_ a: ODataEntity, _ b: ODataEntity, keys: [String]) -> Bool {
        for key in keys {
            switch ODataValue.sortOrder(a[key], b[key]) {
            case .orderedAscending: return true
            case .orderedDescending: return false
            case .orderedSame: continue
            }
        }
        return false
    }

    // MARK: Records to entities

    private static func entity(for user: PayrollData.User) -> ODataEntity {
        let fullName = user.firstName + " " + user.lastName
        return ODataEntity(
            typeName: "User",
            values: [
                "userId": .string(user.userId),
                "username": .string(user.username),
                "status": .string("t"),
                "firstName": .string(user.firstName),
                "lastName": .string(user.lastName),
                "displayName": .string(fullName),
                "defaultFullName": .string(fullName),
                "email": .string(user.email),
                "title": .string(user.title),
                "department": .string(user.department),
                "division": .string(user.division),
                "location": .string(user.location),
                "country": .string(user.country),
                "timeZone": .string(user.timeZone),
                "defaultLocale": .string(user.defaultLocale),
                "hireDate": dateTime(user.hireDate),
                "lastModifiedDateTime": dateTimeOffset(user.lastModified),
            ],
            owner: user.userId)
    }

    private static func entity(for employment: PayrollData.Employment) -> ODataEntity {
        ODataEntity(
            typeName: "EmpEmployment",
            values: [
                "personIdExternal": .string(employment.personIdExternal),
                "userId": .string(employment.userId),
                "startDate": dateTime(employment.startDate),
                "originalStartDate": dateTime(employment.startDate),
                "seniorityDate": dateTime(employment.startDate),
                "endDate": employment.endDate.map(dateTime) ?? .null,
                "isECRecord": .boolean(true),
                "assignmentClass": .string("ST"),
                "jobNumber": .int64(employment.jobNumber),
                "createdDateTime": dateTimeOffset(employment.lastModified),
                "lastModifiedDateTime": dateTimeOffset(employment.lastModified),
            ],
            owner: employment.userId)
    }

    private static func entity(for info: PayrollData.PaymentInformation) -> ODataEntity {
        ODataEntity(
            typeName: "PaymentInformationV3",
            values: [
                "effectiveStartDate": dateTime(info.effectiveStartDate),
                "worker": .string(info.worker),
                "effectiveEndDate": dateTime(info.effectiveEndDate),
                "jobCountry": .string(info.jobCountry),
                "createdDateTime": dateTimeOffset(info.lastModified),
                "lastModifiedDateTime": dateTimeOffset(info.lastModified),
            ],
            owner: info.worker)
    }

    private static func entity(
        for detail: PayrollData.PaymentDetail, of info: PayrollData.PaymentInformation
    ) -> ODataEntity {
        ODataEntity(
            typeName: "PaymentInformationDetailV3",
            values: [
                "PaymentInformationV3_effectiveStartDate": dateTime(info.effectiveStartDate),
                "PaymentInformationV3_worker": .string(info.worker),
                "externalCode": .int64(detail.externalCode),
                "payType": .string(detail.payType),
                "paySequence": .int64(detail.paySequence),
                "amount": detail.amount.map(ODataValue.decimal) ?? .null,
                "percent": detail.percent.map(ODataValue.decimal) ?? .null,
                "currency": .string(detail.currency),
                "bank": .string(detail.bank),
                "bankCountry": .string(detail.bankCountry),
                "accountOwner": .string(detail.accountOwner),
                "accountNumber": .string(detail.accountNumber),
                "iban": optional(detail.iban),
                "businessIdentifierCode": optional(detail.businessIdentifierCode),
                "routingNumber": optional(detail.routingNumber),
                "purpose": optional(detail.purpose),
                "createdDateTime": dateTimeOffset(info.lastModified),
                "lastModifiedDateTime": dateTimeOffset(info.lastModified),
            ],
            owner: info.worker)
    }

    private static func entity(for bank: PayrollData.Bank) -> ODataEntity {
        ODataEntity(
            typeName: "Bank",
            values: [
                "externalCode": .string(bank.externalCode),
                "bankName": .string(bank.bankName),
                "bankBranch": optional(bank.bankBranch),
                "bankCountry": .string(bank.bankCountry),
                "businessIdentifierCode": optional(bank.businessIdentifierCode),
                "routingNumber": optional(bank.routingNumber),
                "street": .string(bank.street),
                "city": .string(bank.city),
                "postalCode": .string(bank.postalCode),
                "effectiveStatus": .string("A"),
                "createdDateTime": dateTimeOffset(bank.lastModified),
                "lastModifiedDateTime": dateTimeOffset(bank.lastModified),
            ],
            owner: nil)
    }

    /// SuccessFactors sets `mdfSystemEffectiveStartDate` of MDF objects that are not effective
    /// dated to 1900-01-01.
    static let mdfStartOfTime = ODataValue.dateTime(ODataDate.milliseconds(year: 1900, month: 1, day: 1))

    private static func entity(for run: PayrollData.PayrollRun) -> ODataEntity {
        ODataEntity(
            typeName: "EmployeePayrollRunResults",
            values: [
                "externalCode": .string(run.externalCode),
                "mdfSystemEffectiveStartDate": mdfStartOfTime,
                "externalName": .string(run.externalName),
                "userId": .string(run.userId),
                "employmentId": .string(run.employmentId),
                "companyId": .string(run.companyId),
                "payrollProviderId": .string(run.payrollProviderId),
                "payrollId": .string(run.payrollId),
                "sequenceNumber": .string(run.sequenceNumber),
                "payrollRunType": .string(run.payrollRunType),
                "payDate": dateTime(run.payDate),
                "startDateWhenPaid": dateTime(run.periodStart),
                "endDateWhenPaid": dateTime(run.periodEnd),
                "currency": .string(run.currency),
                "isVoid": .boolean(run.isVoid),
                "createdDateTime": dateTimeOffset(run.lastModified),
                "lastModifiedDateTime": dateTimeOffset(run.lastModified),
            ],
            owner: run.userId)
    }

    private static func entity(for item: PayrollData.PayrollItem, of run: PayrollData.PayrollRun) -> ODataEntity {
        ODataEntity(
            typeName: "EmployeePayrollRunResultsItems",
            values: [
                "EmployeePayrollRunResults_externalCode": .string(run.externalCode),
                "EmployeePayrollRunResults_mdfSystemEffectiveStartDate": mdfStartOfTime,
                "externalCode": .string(item.externalCode),
                "externalName": .string(item.externalName),
                "wageType": .string(item.wageType),
                "payrollProviderWageType": .string(item.wageType),
                "amount": .decimal(item.amount),
                "quantity": item.quantity.map(ODataValue.decimal) ?? .null,
                "unitOfMeasurement": optional(item.unitOfMeasurement),
                "startDateWhenEarned": dateTime(run.periodStart),
                "endDateWhenEarned": dateTime(run.periodEnd),
                "createdDateTime": dateTimeOffset(run.lastModified),
                "lastModifiedDateTime": dateTimeOffset(run.lastModified),
            ],
            owner: run.userId)
    }

    private static func milliseconds(_ date: Date) -> Int64 {
        let ms = (date.timeIntervalSince1970 * 1000).rounded()
        guard ms.isFinite else { return 0 }
        // Dates outside what OData v2 can carry are clamped rather than trapping on conversion.
        return Int64(max(-62_135_596_800_000, min(253_402_300_799_000, ms)))
    }

    private static func dateTime(_ date: Date) -> ODataValue { .dateTime(milliseconds(date)) }
    private static func dateTimeOffset(_ date: Date) -> ODataValue { .dateTimeOffset(milliseconds(date)) }
    private static func optional(_ text: String?) -> ODataValue { text.map(ODataValue.string) ?? .null }
}
