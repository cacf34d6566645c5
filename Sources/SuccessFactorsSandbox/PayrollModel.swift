/// The part of SuccessFactors' `SFOData` model the payroll sandbox serves.
///
/// Names, keys and types follow SuccessFactors' OData v2 API (as listed by the SAP Cloud SDK's
/// generated SuccessFactors clients, which are built from SF's `$metadata`):
/// - `EmployeePayrollRunResults` is an MDF object keyed by `externalCode` and
///   `mdfSystemEffectiveStartDate`; its pay period is `startDateWhenPaid`/`endDateWhenPaid`.
/// - `EmployeePayrollRunResultsItems` is keyed by its parent's keys plus its own
///   `externalCode`; `amount` and `quantity` are `Edm.Decimal`; items carry no currency (the run does).
/// - `EmpEmployment` is keyed by `personIdExternal` and `userId`; `paymentInformationNav` is to-many.
/// - `PaymentInformationV3` is keyed by `effectiveStartDate` and `worker`;
///   `PaymentInformationDetailV3` by its parent's keys plus `externalCode` (`Edm.Int64`).
/// - `Bank` is keyed by `externalCode`.
/// Only a useful subset of each type's properties and navigation properties is modelled.
enum PayrollModel {
    static let model = ODataModel(
        namespace: "SFOData",
        entityTypes: [
            user, empEmployment, paymentInformation, paymentInformationDetail, bank, payrollRun, payrollRunItem,
        ]
    )

    static let user = ODataEntityType(
        name: "User",
        keys: ["userId"],
        properties: [
            ODataProperty("userId", .string, nullable: false, maxLength: 100, label: "User ID"),
            ODataProperty("username", .string, maxLength: 100, label: "Username"),
            ODataProperty("status", .string, maxLength: 2, label: "Status"),
            ODataProperty("firstName", .string, maxLength: 128, label: "First Name"),
            ODataProperty("lastName", .string, maxLength: 128, label: "Last Name"),
            ODataProperty("displayName", .string, maxLength: 256, label: "Display Name"),
            ODataProperty("defaultFullName", .string, maxLength: 256, label: "Full Name"),
            ODataProperty("email", .string, maxLength: 100, label: "Email"),
            ODataProperty("title", .string, maxLength: 255, label: "Title"),
            ODataProperty("department", .string, maxLength: 128, label: "Department"),
            ODataProperty("division", .string, maxLength: 128, label: "Division"),
            ODataProperty("location", .string, maxLength: 128, label: "Location"),
            ODataProperty("country", .string, maxLength: 128, label: "Country"),
            ODataProperty("timeZone", .string, maxLength: 16, label: "Time Zone"),
            ODataProperty("defaultLocale", .string, maxLength: 32, label: "Default Locale"),
            ODataProperty("hireDate", .dateTime, label: "Hire Date"),
            ODataProperty("lastModifiedDateTime", .dateTimeOffset, label: "Last Modified Date"),
        ],
        navigations: [
            ODataNavigation("empInfo", to: "EmpEmployment", toMany: false, joins: [("userId", "userId")])
        ]
    )

    static let empEmployment = ODataEntityType(
        name: "EmpEmployment",
        keys: ["personIdExternal", "userId"],
        properties: [
            ODataProperty("personIdExternal", .string, nullable: false, maxLength: 100, label: "Person ID"),
            ODataProperty("userId", .string, nullable: false, maxLength: 100, label: "User ID"),
            ODataProperty("startDate", .dateTime, label: "Employment Start Date"),
            ODataProperty("originalStartDate", .dateTime, label: "Original Start Date"),
            ODataProperty("seniorityDate", .dateTime, label: "Seniority Start Date"),
            ODataProperty("endDate", .dateTime, label: "Employment End Date"),
            ODataProperty("isECRecord", .boolean, label: "Is EC Record"),
            ODataProperty("assignmentClass", .string, maxLength: 128, label: "Assignment Class"),
            ODataProperty("jobNumber", .int64, label: "Job Number"),
            ODataProperty("createdDateTime", .dateTimeOffset, label: "Created On"),
            ODataProperty("lastModifiedDateTime", .dateTimeOffset, label: "Last Modified On"),
        ],
        navigations: [
            ODataNavigation(
                "paymentInformationNav", to: "PaymentInformationV3", toMany: true, joins: [("userId", "worker")]),
            ODataNavigation("userNav", to: "User", toMany: false, joins: [("userId", "userId")]),
        ]
    )

    static let paymentInformation = ODataEntityType(
        name: "PaymentInformationV3",
        keys: ["effectiveStartDate", "worker"],
        properties: [
            ODataProperty("effectiveStartDate", .dateTime, nullable: false, label: "Effective Start Date"),
            ODataProperty("worker", .string, nullable: false, maxLength: 100, label: "Worker"),
            ODataProperty("effectiveEndDate", .dateTime, label: "Effective End Date"),
            ODataProperty("jobCountry", .string, maxLength: 128, label: "Job Country"),
            ODataProperty("createdDateTime", .dateTimeOffset, label: "Created On"),
            ODataProperty("lastModifiedDateTime", .dateTimeOffset, label: "Last Modified On"),
        ],
        navigations: [
            ODataNavigation(
                "toPaymentInformationDetailV3", to: "PaymentInformationDetailV3", toMany: true,
                joins: [
                    ("effectiveStartDate", "PaymentInformationV3_effectiveStartDate"),
                    ("worker", "PaymentInformationV3_worker"),
                ]),
            ODataNavigation("workerNav", to: "User", toMany: false, joins: [("worker", "userId")]),
        ]
    )

    static let paymentInformationDetail = ODataEntityType(
        name: "PaymentInformationDetailV3",
        keys: ["PaymentInformationV3_effectiveStartDate", "PaymentInformationV3_worker", "externalCode"],
        properties: [
            ODataProperty(
                "PaymentInformationV3_effectiveStartDate", .dateTime, nullable: false, label: "Effective Start Date"),
            ODataProperty("PaymentInformationV3_worker", .string, nullable: false, maxLength: 100, label: "Worker"),
            ODataProperty("externalCode", .int64, nullable: false, label: "Code"),
            ODataProperty("payType", .string, maxLength: 128, label: "Pay Type"),
            ODataProperty("paySequence", .int64, label: "Pay Sequence"),
            ODataProperty("amount", .decimal, label: "Amount"),
            ODataProperty("percent", .decimal, label: "Percent"),
            ODataProperty("currency", .string, maxLength: 128, label: "Currency"),
            ODataProperty("bank", .string, maxLength: 128, label: "Bank"),
            ODataProperty("bankCountry", .string, maxLength: 128, label: "Bank Country"),
            ODataProperty("accountOwner", .string, maxLength: 255, label: "Account Owner"),
            ODataProperty("accountNumber", .string, maxLength: 255, label: "Account Number"),
            ODataProperty("iban", .string, maxLength: 255, label: "IBAN"),
            ODataProperty("businessIdentifierCode", .string, maxLength: 255, label: "Business Identifier Code"),
            ODataProperty("routingNumber", .string, maxLength: 255, label: "Routing Number"),
            ODataProperty("purpose", .string, maxLength: 255, label: "Purpose"),
            ODataProperty("createdDateTime", .dateTimeOffset, label: "Created On"),
            ODataProperty("lastModifiedDateTime", .dateTimeOffset, label: "Last Modified On"),
        ],
        navigations: [
            ODataNavigation("bankNav", to: "Bank", toMany: false, joins: [("bank", "externalCode")])
        ]
    )

    static let bank = ODataEntityType(
        name: "Bank",
        keys: ["externalCode"],
        properties: [
            ODataProperty("externalCode", .string, nullable: false, maxLength: 128, label: "Code"),
            ODataProperty("bankName", .string, maxLength: 255, label: "Bank Name"),
            ODataProperty("bankBranch", .string, maxLength: 255, label: "Bank Branch"),
            ODataProperty("bankCountry", .string, maxLength: 128, label: "Bank Country"),
            ODataProperty("businessIdentifierCode", .string, maxLength: 255, label: "Business Identifier Code"),
            ODataProperty("routingNumber", .string, maxLength: 255, label: "Routing Number"),
            ODataProperty("street", .string, maxLength: 255, label: "Street"),
            ODataProperty("city", .string, maxLength: 255, label: "City"),
            ODataProperty("postalCode", .string, maxLength: 255, label: "Postal Code"),
            ODataProperty("effectiveStatus", .string, maxLength: 255, label: "Status"),
            ODataProperty("createdDateTime", .dateTimeOffset, label: "Created On"),
            ODataProperty("lastModifiedDateTime", .dateTimeOffset, label: "Last Modified On"),
        ],
        navigations: []
    )

    static let payrollRun = ODataEntityType(
        name: "EmployeePayrollRunResults",
        keys: ["externalCode", "mdfSystemEffectiveStartDate"],
        properties: [
            ODataProperty("externalCode", .string, nullable: false, maxLength: 128, label: "External Code"),
            ODataProperty(
                "mdfSystemEffectiveStartDate", .dateTime, nullable: false, label: "Effective Start Date"),
            ODataProperty("externalName", .string, maxLength: 255, label: "External Name"),
            ODataProperty("userId", .string, maxLength: 100, label: "User"),
            ODataProperty("employmentId", .string, maxLength: 128, label: "Employment ID"),
            ODataProperty("companyId", .string, maxLength: 128, label: "Company"),
            ODataProperty("payrollProviderId", .string, maxLength: 128, label: "Payroll Provider ID"),
            ODataProperty("payrollId", .string, maxLength: 128, label: "Payroll ID"),
            ODataProperty("sequenceNumber", .string, maxLength: 128, label: "Sequence Number"),
            ODataProperty("payrollRunType", .string, maxLength: 128, label: "Payroll Run Type"),
            ODataProperty("payDate", .dateTime, label: "Pay Date"),
            ODataProperty("startDateWhenPaid", .dateTime, label: "Start Date of Pay Period"),
            ODataProperty("endDateWhenPaid", .dateTime, label: "End Date of Pay Period"),
            ODataProperty("currency", .string, maxLength: 128, label: "Currency"),
            ODataProperty("isVoid", .boolean, label: "Is Void"),
            ODataProperty("createdDateTime", .dateTimeOffset, label: "Created On"),
            ODataProperty("lastModifiedDateTime", .dateTimeOffset, label: "Last Modified On"),
        ],
        navigations: [
            ODataNavigation(
                "employeePayrollRunResultsItems", to: "EmployeePayrollRunResultsItems", toMany: true,
                joins: [
                    ("externalCode", "EmployeePayrollRunResults_externalCode"),
                    ("mdfSystemEffectiveStartDate", "EmployeePayrollRunResults_mdfSystemEffectiveStartDate"),
                ]),
            ODataNavigation("userIdNav", to: "User", toMany: false, joins: [("userId", "userId")]),
        ]
    )

    static let payrollRunItem = ODataEntityType(
        name: "EmployeePayrollRunResultsItems",
        keys: [
            "EmployeePayrollRunResults_externalCode", "EmployeePayrollRunResults_mdfSystemEffectiveStartDate",
            "externalCode",
        ],
        properties: [
            ODataProperty(
                "EmployeePayrollRunResults_externalCode", .string, nullable: false, maxLength: 128,
                label: "Employee Payroll Run Results"),
            ODataProperty(
                "EmployeePayrollRunResults_mdfSystemEffectiveStartDate", .dateTime, nullable: false,
                label: "Employee Payroll Run Results Effective Start Date"),
            ODataProperty("externalCode", .string, nullable: false, maxLength: 128, label: "External Code"),
            ODataProperty("externalName", .string, maxLength: 255, label: "External Name"),
            ODataProperty("wageType", .string, maxLength: 128, label: "Wage Type"),
            ODataProperty("payrollProviderWageType", .string, maxLength: 128, label: "Payroll Provider Wage Type"),
            ODataProperty("amount", .decimal, label: "Amount"),
            ODataProperty("quantity", .decimal, label: "Quantity"),
            ODataProperty("unitOfMeasurement", .string, maxLength: 128, label: "Unit of Measurement"),
            ODataProperty("startDateWhenEarned", .dateTime, label: "Start Date When Earned"),
            ODataProperty("endDateWhenEarned", .dateTime, label: "End Date When Earned"),
            ODataProperty("createdDateTime", .dateTimeOffset, label: "Created On"),
            ODataProperty("lastModifiedDateTime", .dateTimeOffset, label: "Last Modified On"),
        ],
        navigations: []
    )
}
