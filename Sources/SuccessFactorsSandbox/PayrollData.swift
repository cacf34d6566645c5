package import Foundation

/// The records the sandbox's payroll service answers from: users, their employment, payment
/// information with bank details, banks, and payroll runs with their items.
///
/// `PayrollData.demo` is the fixed demo data set. Decimal amounts are text in the form
/// SuccessFactors answers them (`"4250.00"`, `"-935.00"`). Dates are instants in UTC.
package struct PayrollData: Sendable {
    package var users: [User]
    package var employments: [Employment]
    package var paymentInformation: [PaymentInformation]
    package var banks: [Bank]
    package var payrollRuns: [PayrollRun]

    package init(
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
    package var userIds: [String] {
        var ids = Set(users.map(\.userId))
        ids.formUnion(employments.map(\.userId))
        ids.formUnion(paymentInformation.map(\.worker))
        ids.formUnion(payrollRuns.map(\.userId))
        return ids.sorted()
    }

    /// A SuccessFactors `User`.
    package struct User: Sendable {
        package var userId: String
        package var username: String
        package var firstName: String
        package var lastName: String
        package var email: String
        package var title: String
        package var department: String
        package var division: String
        package var location: String
        package var country: String
        package var timeZone: String
        package var defaultLocale: String
        package var hireDate: Date
        package var lastModified: Date

        package init(
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
    package struct Employment: Sendable {
        package var userId: String
        package var personIdExternal: String
        package var startDate: Date
        package var endDate: Date?
        package var jobNumber: Int64
        package var lastModified: Date

        package init(
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
    package struct PaymentInformation: Sendable {
        package var worker: String
        package var effectiveStartDate: Date
        package var effectiveEndDate: Date
        package var jobCountry: String
        package var details: [PaymentDetail]
        package var lastModified: Date

        package init(
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
    package struct PaymentDetail: Sendable {
        package var externalCode: Int64
        package var payType: String
        package var paySequence: Int64
        /// A fixed amount paid to this account, or nil for "the rest".
        package var amount: String?
        package var percent: String?
        package var currency: String
        /// `externalCode` of the `Bank`.
        package var bank: String
        package var bankCountry: String
        package var accountOwner: String
        package var accountNumber: String
        package var iban: String?
        package var businessIdentifierCode: String?
        package var routingNumber: String?
        package var purpose: String?

        package init(
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
    package struct Bank: Sendable {
        package var externalCode: String
        package var bankName: String
        package var bankBranch: String?
        package var bankCountry: String
        package var businessIdentifierCode: String?
        package var routingNumber: String?
        package var street: String
        package var city: String
        package var postalCode: String
        package var lastModified: Date

        package init(
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
    package struct PayrollRun: Sendable {
        package var externalCode: String
        package var externalName: String
        package var userId: String
        package var employmentId: String
        package var companyId: String
        package var payrollProviderId: String
        package var payrollId: String
        package var sequenceNumber: String
        package var payrollRunType: String
        package var payDate: Date
        /// First day of the pay period (`startDateWhenPaid`).
        package var periodStart: Date
        /// Last day of the pay period (`endDateWhenPaid`).
        package var periodEnd: Date
        package var currency: String
        package var isVoid: Bool
        package var items: [PayrollItem]
        package var lastModified: Date

        package init(
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
    package struct PayrollItem: Sendable {
        package var externalCode: String
        package var externalName: String
        package var wageType: String
        /// Signed decimal text: earnings positive, deductions negative.
        package var amount: String
        package var quantity: String?
        package var unitOfMeasurement: String?

        package init(
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
