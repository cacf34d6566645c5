extension Templates {
    /// The one stylesheet of the console and the self-service page, served by Midtier itself
    /// (`/console/style.css`, `/mobileservices/me/style.css`).
    static let stylesheet = """
        :root { --ink: #1d2430; --muted: #5b6575; --line: #d7dce3; --bg: #f5f7fa; --accent: #0a6ed1; --bad: #b00020; --ok: #107e3e; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); background: var(--bg); }
        .bar { display: flex; flex-wrap: wrap; align-items: center; gap: 1.2rem; padding: .6rem 1.2rem; background: #243447; color: #fff; }
        .bar a { color: #dbe7f3; text-decoration: none; }
        .bar a[aria-current="page"] { color: #fff; font-weight: 600; border-bottom: 2px solid #fff; }
        .bar nav { display: flex; gap: 1rem; flex: 1; }
        .brand { font-weight: 700; }
        .sign-out { display: flex; align-items: center; gap: .6rem; margin-left: auto; }
        .who { color: #dbe7f3; }
        main { max-width: 72rem; margin: 0 auto; padding: 1rem 1.2rem 3rem; }
        h1 { font-size: 1.5rem; margin: .6rem 0 1rem; }
        h2 { font-size: 1.15rem; margin: .2rem 0 .6rem; }
        .cards { display: flex; flex-wrap: wrap; gap: 1rem; margin-bottom: 1rem; }
        .card { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 1rem; margin-bottom: 1rem; }
        .cards .card { flex: 1 1 16rem; }
        .narrow { max-width: 30rem; }
        form.card label, .narrow label { display: block; margin: .5rem 0 .2rem; }
        input, select, textarea { font: inherit; padding: .35rem .5rem; border: 1px solid var(--line); border-radius: 4px; background: #fff; }
        .narrow input, .narrow textarea { width: 100%; }
        button { font: inherit; padding: .35rem .9rem; border: 1px solid var(--accent); border-radius: 4px; background: var(--accent); color: #fff; cursor: pointer; }
        .bar button { background: transparent; border-color: #dbe7f3; }
        button.danger { background: var(--bad); border-color: var(--bad); }
        .narrow button { margin-top: .8rem; }
        .filters, .inline { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem; margin-bottom: 1rem; }
        table { width: 100%; border-collapse: collapse; background: #fff; border: 1px solid var(--line); }
        pre { white-space: pre-wrap; overflow-wrap: anywhere; }
        th, td { text-align: left; padding: .4rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; overflow-wrap: break-word; }
        th { background: #eef1f5; font-weight: 600; white-space: nowrap; }
        .when { white-space: nowrap; }
        .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: .9em; }
        .actions a { margin-right: .5rem; }
        .state-active, .ok { color: var(--ok); }
        .state-locked { color: #b25e00; }
        .state-wiped, .bad { color: var(--bad); }
        .notice { background: #e8f3ea; border: 1px solid #9fd0ad; padding: .5rem .8rem; border-radius: 4px; }
        .problem { background: #fdecee; border: 1px solid #f1a9b3; padding: .5rem .8rem; border-radius: 4px; }
        .consequence { font-weight: 600; }
        .hint { color: var(--muted); }
        .realm { color: var(--muted); font-weight: 400; }
        .pager a { margin-right: 1rem; }
        details summary { cursor: pointer; }
        """
}
