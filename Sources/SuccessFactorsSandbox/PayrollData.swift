import Foundation

/// The records the sandbox's payroll service answers from: users, their employment, payment
/// information with bank details, banks, and payroll runs with their items.
///
/// `PayrollData.demo` is the fixed demo data set. Decimal amounts are text in the form
/// SuccessFactors answers them (`"4250.00"`, `"-935.00"`). Dates are instants in UTC.
public struct PayrollData: Sendable {
    public var users: [User]
    public var employments: [Employment]
    public var paymentInformation: [PaymentInformation]
    public var banks: [Bank]
    public var payrollRuns: [PayrollRun]

    public init(
        users: [User], employments: [Employment], paymentInformation: [PaymentInformation], banks: [Bank],
        payrollRuns: [PayrollRun]
    ) {
        self.users = users
        self.employments = employments
        self.paymentInformation = paymentInformation
        self.banks = banks
        self.payrollRuns = payrollRuns
    }

    /// Every user id that has data (a user record, an employment, payment information or a
    /// payroll run), sorted.
    public var userIds: [String] {
        var ids = Set(users.map(\.userId))
        ids.formUnion(employments.map(\.userId))
        ids.formUnion(paymentInformation.map(\.worker))
        ids.formUnion(payrollRuns.map(\.userId))
        return ids.sorted()
    }

    /// A SuccessFactors `User`.
    public struct User: Sendable {
        public var userId: String
        public var username: String
        public var firstName: String
        public var lastName: String
        public var email: String
        public var title: String
        public var department: String
        public var division: String
        public var location: String
        public var country: String
        public var timeZone: String
        public var defaultLocale: String
        public var hireDate: Date
        public var lastModified: Date

        public init(
            userId: String, username: String, firstName: String, lastName: String, email: String, title: String,
            department: String, division: String, location: String, country: String, timeZone: String,
            defaultLocale: String, hireDate: Date, lastModified: Date
        ) {
            self.userId = userId
            self.username = username
            self.firstName = firstName
            self.lastName = lastName
            self.email = email
            self.title = title
            self.department = department
            self.division = division
            self.location = location
            self.country = country
            self.timeZone = timeZone
            self.defaultLocale = defaultLocale
            self.hireDate = hireDate
            self.lastModified = lastModified
        }
    }

    /// An `EmpEmployment` record.
    public struct Employment: Sendable {
        public var userId: String
        public var personIdExternal: String
        public var startDate: Date
        public var endDate: Date?
        public var jobNumber: Int64
        public var lastModified: Date

        public init(
            userId: String, personIdExternal: String, startDate: Date, endDate: Date? = nil, jobNumber: Int64 = 1,
            lastModified: Date
        ) {
            self.userId = userId
            self.personIdExternal = personIdExternal
            self.startDate = startDate
            self.endDate = endDate
            self.jobNumber = jobNumber
            self.lastModified = lastModified
        }
    }

    /// A `PaymentInformationV3` record with its `PaymentInformationDetailV3` rows.
    public struct PaymentInformation: Sendable {
        public var worker: String
        public var effectiveStartDate: Date
        public var effectiveEndDate: Date
        public var jobCountry: String
        public var details: [PaymentDetail]
        public var lastModified: Date

        public init(
            worker: String, effectiveStartDate: Date, effectiveEndDate: Date, jobCountry: String,
            details: [PaymentDetail], lastModified: Date
        ) {
            self.worker = worker
            self.effectiveStartDate = effectiveStartDate
            self.effectiveEndDate = effectiveEndDate
            self.jobCountry = jobCountry
            self.details = details
            self.lastModified = lastModified
        }
    }

    /// A `PaymentInformationDetailV3` row: one bank account the pay goes to.
    public struct PaymentDetail: Sendable {
        public var externalCode: Int64
        public var payType: String
        public var paySequence: Int64
        /// A fixed amount paid to this account, or nil for "the rest".
        public var amount: String?
        public var percent: String?
        public var currency: String
        /// `externalCode` of the `Bank`.
        public var bank: String
        public var bankCountry: String
        public var accountOwner: String
        public var accountNumber: String
        public var iban: String?
        public var businessIdentifierCode: String?
        public var routingNumber: String?
        public var purpose: String?

        public init(
            externalCode: Int64, payType: String = "MAIN", paySequence: Int64, amount: String? = nil,
            percent: String? = nil, currency: String, bank: String, bankCountry: String, accountOwner: String,
            accountNumber: String, iban: String? = nil, businessIdentifierCode: String? = nil,
            routingNumber: String? = nil, purpose: String? = nil
        ) {
            self.externalCode = externalCode
            self.payType = payType
            self.paySequence = paySequence
            self.amount = amount
            self.percent = percent
            self.currency = currency
            self.bank = bank
            self.bankCountry = bankCountry
            self.accountOwner = accountOwner
            self.accountNumber = accountNumber
            self.iban = iban
            self.businessIdentifierCode = businessIdentifierCode
            self.routingNumber = routingNumber
            self.purpose = purpose
        }
    }

    /// A `Bank`: reference data, not any one person's.
    public struct Bank: Sendable {
        public var externalCode: String
        public var bankName: String
        public var bankBranch: String?
        public var bankCountry: String
        public var businessIdentifierCode: String?
        public var routingNumber: String?
        public var street: String
        public var city: String
        public var postalCode: String
        public var lastModified: Date

        public init(
            externalCode: String, bankName: String, bankBranch: String? = nil, bankCountry: String,
            businessIdentifierCode: String? = nil, routingNumber: String? = nil, street: String, city: String,
            postalCode: String, lastModified: Date
        ) {
            self.externalCode = externalCode
            self.bankName = bankName
            self.bankBranch = bankBranch
            self.bankCountry = bankCountry
            self.businessIdentifierCode = businessIdentifierCode
            self.routingNumber = routingNumber
            self.street = street
            self.city = city
            self.postalCode = postalCode
            self.lastModified = lastModified
        }
    }

    /// An `EmployeePayrollRunResults` record (one pay statement) with its items.
    public struct PayrollRun: Sendable {
        public var externalCode: String
        public var externalName: String
        public var userId: String
        public var employmentId: String
        public var companyId: String
        public var payrollProviderId: String
        public var payrollId: String
        public var sequenceNumber: String
        public var payrollRunType: String
        public var payDate: Date
        /// First day of the pay period (`startDateWhenPaid`).
        public var periodStart: Date
        /// Last day of the pay period (`endDateWhenPaid`).
        public var periodEnd: Date
        public var currency: String
        public var isVoid: Bool
        public var items: [PayrollItem]
        public var lastModified: Date

        public init(
            externalCode: String, externalName: String, userId: String, employmentId: String, companyId: String,
            payrollProviderId: String, payrollId: String, sequenceNumber: String = "1",
            payrollRunType: String = "REGULAR", payDate: Date, periodStart: Date, periodEnd: Date, currency: String,
            isVoid: Bool = false, items: [PayrollItem], lastModified: Date
        ) {
            self.externalCode = externalCode
            self.externalName = externalName
            self.userId = userId
            self.employmentId = employmentId
            self.companyId = companyId
            self.payrollProviderId = payrollProviderId
            self.payrollId = payrollId
            self.sequenceNumber = sequenceNumber
            self.payrollRunType = payrollRunType
            self.payDate = payDate
            self.periodStart = periodStart
            self.periodEnd = periodEnd
            self.currency = currency
            self.isVoid = isVoid
            self.items = items
            self.lastModified = lastModified
        }
    }

    /// An `EmployeePayrollRunResultsItems` row: one wage type of a pay statement.
    public struct PayrollItem: Sendable {
        public var externalCode: String
        public var externalName: String
        public var wageType: String
        /// Signed decimal text: earnings positive, deductions negative.
        public var amount: String
        public var quantity: String?
        public var unitOfMeasurement: String?

        public init(
            externalCode: String, externalName: String, wageType: String, amount: String, quantity: String? = nil,
            unitOfMeasurement: String? = nil
        ) {
            self.externalCode = externalCode
            self.externalName = externalName
            self.wageType = wageType
            self.amount = amount
            self.quantity = quantity
            self.unitOfMeasurement = unitOfMeasurement
        }
    }
}
