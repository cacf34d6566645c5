import Foundation

extension PayrollData {
    /// The demo data: three employees, 100001 Alice Smith (USA, USD), 100002 Bob Jones (Germany,
    /// EUR, pay split over two bank accounts) and 100003 Carol White (United Kingdom, GBP), each
    /// with one employment, payment information and 24 monthly payroll runs (January 2024 to
    /// December 2025, paid on the last day of the month) of 4 to 6 items each.
    /// Fixed dates, no randomness: every build answers the same.
    package static let demo: PayrollData = PayrollDemo.build()

    /// The demo data plus `count` generated employees, for load tests that need many distinct
    /// users (`midtier sandbox --extra-employees`): ids `200001`, `200002`, … (user name
    /// `employee200001`, name "Employee 200001"), each with Alice's pay profile under their own
    /// id — an employment and the same 24 payroll runs — and no payment information.
    package static func demo(extraEmployees count: Int) -> PayrollData {
        PayrollDemo.build(extraEmployees: count)
    }
}

/// Builds `PayrollData.demo` from one profile per employee.
private enum PayrollDemo {
    /// A deduction computed from the gross pay (basis points) or a fixed amount (cents).
    struct Deduction {
        let wageType: String
        let name: String
        let basisPoints: Int64?
        let fixedCents: Int64?
    }

    struct Profile {
        let userId: String
        let username: String
        let firstName: String
        let lastName: String
        let title: String
        let department: String
        let location: String
        let country: String
        let countryCode: String
        let timeZone: String
        let locale: String
        let hireDate: Date
        let currency: String
        let companyId: String
        let payrollId: String
        /// Monthly base salary in 2024, in cents; 2025 adds `raiseBasisPoints`.
        let baseCents: Int64
        let raiseBasisPoints: Int64
        let overtimeMonths: Set<Int>
        let overtimeHours: Int64
        let overtimeRateCents: Int64
        let deductions: [Deduction]
    }

    static func build(extraEmployees: Int = 0) -> PayrollData {
        let profiles = [alice, bob, carol] + (0..<max(0, extraEmployees)).map { generated(userId: String(200_001 + $0)) }
        let recordsChanged = date(2024, 1, 15, hour: 9)
        let users = profiles.map { profile in
            PayrollData.User(
                userId: profile.userId, username: profile.username, firstName: profile.firstName,
                lastName: profile.lastName, email: "\(profile.username)@example.com", title: profile.title,
                department: profile.department, division: "Corporate Services", location: profile.location,
                country: profile.country, timeZone: profile.timeZone, defaultLocale: profile.locale,
                hireDate: profile.hireDate, lastModified: recordsChanged)
        }
        let employments = profiles.map { profile in
            PayrollData.Employment(
                userId: profile.userId, personIdExternal: profile.userId, startDate: profile.hireDate,
                lastModified: recordsChanged)
        }
        let payrollRuns = profiles.flatMap { profile in
            (2024...2025).flatMap { year in (1...12).map { month in run(for: profile, year: year, month: month) } }
        }
        return PayrollData(
            users: users, employments: employments, paymentInformation: paymentInformation, banks: banks,
            payrollRuns: payrollRuns)
    }

    // MARK: Employees

    static let alice = Profile(
        userId: "100001", username: "asmith", firstName: "Alice", lastName: "Smith", title: "Senior Accountant",
        department: "Finance", location: "New York", country: "United States", countryCode: "USA",
        timeZone: "America/New_York", locale: "en_US", hireDate: date(2019, 3, 1), currency: "USD",
        companyId: "ACE_USA", payrollId: "US_MONTHLY", baseCents: 425_000, raiseBasisPoints: 300,
        overtimeMonths: [3, 6, 9, 12], overtimeHours: 10, overtimeRateCents: 4_000,
        deductions: [
            Deduction(wageType: "/401", name: "Income Tax", basisPoints: 1_800, fixedCents: nil),
            Deduction(wageType: "/403", name: "Social Security", basisPoints: 765, fixedCents: nil),
            Deduction(wageType: "/410", name: "Health Insurance", basisPoints: nil, fixedCents: 18_500),
        ])

    static let bob = Profile(
        userId: "100002", username: "bjones", firstName: "Bob", lastName: "Jones", title: "Software Engineer",
        department: "Engineering", location: "Berlin", country: "Germany", countryCode: "DEU",
        timeZone: "Europe/Berlin", locale: "de_DE", hireDate: date(2021, 7, 1), currency: "EUR",
        companyId: "ACE_DEU", payrollId: "DE_MONTHLY", baseCents: 510_000, raiseBasisPoints: 300,
        overtimeMonths: [], overtimeHours: 0, overtimeRateCents: 0,
        deductions: [
            Deduction(wageType: "/401", name: "Income Tax", basisPoints: 2_400, fixedCents: nil),
            Deduction(wageType: "/403", name: "Social Security", basisPoints: 2_010, fixedCents: nil),
        ])

    static let carol = Profile(
        userId: "100003", username: "cwhite", firstName: "Carol", lastName: "White", title: "HR Business Partner",
        department: "Human Resources", location: "London", country: "United Kingdom", countryCode: "GBR",
        timeZone: "Europe/London", locale: "en_GB", hireDate: date(2022, 2, 14), currency: "GBP",
        companyId: "ACE_GBR", payrollId: "GB_MONTHLY", baseCents: 390_000, raiseBasisPoints: 300,
        overtimeMonths: [2, 5, 8, 11], overtimeHours: 8, overtimeRateCents: 3_000,
        deductions: [
            Deduction(wageType: "/401", name: "Income Tax (PAYE)", basisPoints: 2_000, fixedCents: nil),
            Deduction(wageType: "/403", name: "National Insurance", basisPoints: 800, fixedCents: nil),
            Deduction(wageType: "/420", name: "Pension Contribution", basisPoints: 500, fixedCents: nil),
        ])

    /// A generated employee: Alice's profile under another id and name.
    static func generated(userId: String) -> Profile {
        let a = alice
        return Profile(
            userId: userId, username: "employee\(userId)", firstName: "Employee", lastName: userId, title: a.title,
            department: a.department, location: a.location, country: a.country, countryCode: a.countryCode,
            timeZone: a.timeZone, locale: a.locale, hireDate: a.hireDate, currency: a.currency, companyId: a.companyId,
            payrollId: a.payrollId, baseCents: a.baseCents, raiseBasisPoints: a.raiseBasisPoints,
            overtimeMonths: a.overtimeMonths, overtimeHours: a.overtimeHours, overtimeRateCents: a.overtimeRateCents,
            deductions: a.deductions)
    }

    // MARK: Payment information and banks

    static let paymentInformation: [PayrollData.PaymentInformation] = {
        let start = date(2024, 1, 1)
        let end = date(9999, 12, 31)
        let changed = date(2024, 1, 2, hour: 10)
        return [
            PayrollData.PaymentInformation(
                worker: "100001", effectiveStartDate: start, effectiveEndDate: end, jobCountry: "USA",
                details: [
                    PayrollData.PaymentDetail(
                        externalCode: 3201, paySequence: 1, currency: "USD", bank: "BANK-US-001", bankCountry: "USA",
                        accountOwner: "Alice Smith", accountNumber: "000123456789",
                        businessIdentifierCode: "FEXBUS33XXX", routingNumber: "110000000", purpose: "Salary")
                ], lastModified: changed),
            PayrollData.PaymentInformation(
                worker: "100002", effectiveStartDate: start, effectiveEndDate: end, jobCountry: "DEU",
                details: [
                    PayrollData.PaymentDetail(
                        externalCode: 3202, paySequence: 1, amount: "300.00", currency: "EUR", bank: "BANK-DE-002",
                        bankCountry: "DEU", accountOwner: "Bob Jones", accountNumber: "0000202051",
                        iban: "DE02120300000000202051", businessIdentifierCode: "EXSPDEBBXXX", purpose: "Savings"),
                    PayrollData.PaymentDetail(
                        externalCode: 3203, paySequence: 2, currency: "EUR", bank: "BANK-DE-001", bankCountry: "DEU",
                        accountOwner: "Bob Jones", accountNumber: "0532013000", iban: "DE89370400440532013000",
                        businessIdentifierCode: "DBEIDEFFXXX", purpose: "Salary"),
                ], lastModified: changed),
            PayrollData.PaymentInformation(
                worker: "100003", effectiveStartDate: start, effectiveEndDate: end, jobCountry: "GBR",
                details: [
                    PayrollData.PaymentDetail(
                        externalCode: 3204, paySequence: 1, currency: "GBP", bank: "BANK-GB-001", bankCountry: "GBR",
                        accountOwner: "Carol White", accountNumber: "31926819", iban: "GB29NWBK60161331926819",
                        businessIdentifierCode: "EXMPGB2LXXX", routingNumber: "601613", purpose: "Salary")
                ], lastModified: changed),
        ]
    }()

    static let banks: [PayrollData.Bank] = {
        let changed = date(2023, 11, 20, hour: 8)
        return [
            PayrollData.Bank(
                externalCode: "BANK-DE-001", bankName: "Deutsche Beispielbank", bankBranch: "Berlin Mitte",
                bankCountry: "DEU", businessIdentifierCode: "DBEIDEFFXXX", street: "Unter den Linden 1",
                city: "Berlin", postalCode: "10117", lastModified: changed),
            PayrollData.Bank(
                externalCode: "BANK-DE-002", bankName: "Beispiel Sparkasse", bankBranch: "Kreuzberg",
                bankCountry: "DEU", businessIdentifierCode: "EXSPDEBBXXX", street: "Oranienstrasse 25",
                city: "Berlin", postalCode: "10999", lastModified: changed),
            PayrollData.Bank(
                externalCode: "BANK-GB-001", bankName: "Example Bank plc", bankBranch: "City of London",
                bankCountry: "GBR", businessIdentifierCode: "EXMPGB2LXXX", routingNumber: "601613",
                street: "1 Threadneedle Street", city: "London", postalCode: "EC2R 8AH", lastModified: changed),
            PayrollData.Bank(
                externalCode: "BANK-US-001", bankName: "First Example Bank", bankBranch: "Midtown",
                bankCountry: "USA", businessIdentifierCode: "FEXBUS33XXX", routingNumber: "110000000",
                street: "350 Fifth Avenue", city: "New York", postalCode: "10118", lastModified: changed),
        ]
    }()

    // MARK: Payroll runs

    static let monthNames = [
        "January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
        "November", "December",
    ]

    static func run(for profile: Profile, year: Int, month: Int) -> PayrollData.PayrollRun {
        let lastDay = ODataDate.daysInMonth(year: year, month: month)
        let periodStart = date(year, month, 1)
        let periodEnd = date(year, month, lastDay)
        let code = "PRR-\(profile.userId)-\(year)-\(month < 10 ? "0" : "")\(month)"

        let base = year >= 2025 ? percentOf(profile.baseCents, 10_000 + profile.raiseBasisPoints) : profile.baseCents
        var earnings: [(wageType: String, name: String, cents: Int64, quantity: Int64?)] = [
            ("1000", "Base Salary", base, nil)
        ]
        if profile.overtimeMonths.contains(month) {
            earnings.append(("1100", "Overtime", profile.overtimeHours * profile.overtimeRateCents, profile.overtimeHours))
        }
        let gross = earnings.reduce(0) { $0 + $1.cents }

        var items: [PayrollData.PayrollItem] = []
        func add(_ wageType: String, _ name: String, _ cents: Int64, quantity: Int64? = nil) {
            let number = items.count + 1
            items.append(
                PayrollData.PayrollItem(
                    externalCode: "\(code)-\(number < 10 ? "0" : "")\(number)", externalName: name, wageType: wageType,
                    amount: decimalText(cents: cents), quantity: quantity.map { decimalText(cents: $0 * 100) },
                    unitOfMeasurement: quantity == nil ? nil : "HUR"))
        }
        for earning in earnings {
            add(earning.wageType, earning.name, earning.cents, quantity: earning.quantity)
        }
        var net = gross
        for deduction in profile.deductions {
            let cents = deduction.fixedCents ?? percentOf(gross, deduction.basisPoints ?? 0)
            net -= cents
            add(deduction.wageType, deduction.name, -cents)
        }
        add("/559", "Net Pay (Bank Transfer)", net)

        return PayrollData.PayrollRun(
            externalCode: code, externalName: "Payroll \(monthNames[month - 1]) \(year)", userId: profile.userId,
            employmentId: profile.userId, companyId: profile.companyId, payrollProviderId: "ECP",
            payrollId: profile.payrollId, payDate: periodEnd, periodStart: periodStart, periodEnd: periodEnd,
            currency: profile.currency, items: items,
            lastModified: date(year, month, lastDay - 3, hour: 9, minute: 30))
    }

    /// `cents × basisPoints / 10000`, rounded half up.
    static func percentOf(_ cents: Int64, _ basisPoints: Int64) -> Int64 {
        (cents * basisPoints + 5_000) / 10_000
    }

    /// `425000` → `"4250.00"`, `-93500` → `"-935.00"`.
    static func decimalText(cents: Int64) -> String {
        let magnitude = cents.magnitude
        let fraction = magnitude % 100
        return (cents < 0 ? "-" : "") + "\(magnitude / 100)." + (fraction < 10 ? "0" : "") + "\(fraction)"
    }

    static func date(_ year: Int, _ month: Int, _ day: Int, hour: Int = 0, minute: Int = 0) -> Date {
        let ms = ODataDate.milliseconds(year: year, month: month, day: day, hour: hour, minute: minute)
        return Date(timeIntervalSince1970: Double(ms) / 1000)
    }
}
