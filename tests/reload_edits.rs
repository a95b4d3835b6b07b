//! Hot reload, end to end: a policy edit changes the next requests without a restart, however
//! the file is replaced; a broken edit keeps the old version serving and shows in `/status`;
//! the cache keeps its objects across a reload.

mod reload_support;
mod support;

use std::time::Duration;

use reload_support::*;
use support::{get, Origin, OriginReply};

async fn origin() -> Origin {
    Origin::fixed(OriginReply::ok("body").cache_control("no-store")).await
}

#[tokio::test]
async fn write_in_place_is_picked_up() {
    let origin = origin().await;
    let (policy, running, addr) = start_watching(origin.addr, &marking("A"), |_| {}).await;
    assert_eq!(marker(&get(addr, "/", &[]).await), "A");

    write_in_place(&policy, &marking("B"));
    serves_generation(&running, addr, 2, "B").await;
    assert_eq!(running.reload_status().ok, 1);
}

#[tokio::test]
async fn rename_over_is_picked_up() {
    let origin = origin().await;
    let (policy, running, addr) = start_watching(origin.addr, &marking("A"), |_| {}).await;
    assert_eq!(marker(&get(addr, "/", &[]).await), "A");

    rename_over(&policy, &marking("B"));
    serves_generation(&running, addr, 2, "B").await;

    // The watch survives the rename: the new inode is watched through its directory.
    rename_over(&policy, &marking("C"));
    serves_generation(&running, addr, 3, "C").await;
}

#[tokio::test]
async fn symlink_swap_is_picked_up() {
    let origin = origin().await;
    let dir = temp_dir();
    let (a, b, link) = (
        path_in(&dir, "a.vcl"),
        path_in(&dir, "b.vcl"),
        path_in(&dir, "policy.vcl"),
    );
    write_in_place(&a, &marking("A"));
    write_in_place(&b, &marking("B"));
    std::os::unix::fs::symlink(&a, &link).unwrap();
    let (running, addr) = start_with_policy(origin.addr, &link, |_| {}).await;
    assert_eq!(marker(&get(addr, "/", &[]).await), "A");

    swap_symlink(&b, &link);
    serves_generation(&running, addr, 2, "B").await;

    // An edit of the file the link points to now is seen too.
    rename_over(&b, &marking("B2"));
    serves_generation(&running, addr, 3, "B2").await;
}

/// Kubernetes mounts a ConfigMap as `dir/policy.vcl -> ..data/policy.vcl`,
/// `..data -> ..2024_01_01_00_00_00.1`, and updates it by writing a new timestamped directory,
/// pointing `..data_tmp` at it and renaming `..data_tmp` over `..data`.
#[tokio::test]
async fn configmap_style_swap_is_picked_up() {
    let origin = origin().await;
    let dir = temp_dir();
    let first = path_in(&dir, "..2024_01_01_00_00_00.1");
    std::fs::create_dir(&first).unwrap();
    write_in_place(&first.join("policy.vcl"), &marking("A"));
    std::os::unix::fs::symlink("..2024_01_01_00_00_00.1", path_in(&dir, "..data")).unwrap();
    let policy = path_in(&dir, "policy.vcl");
    std::os::unix::fs::symlink("..data/policy.vcl", &policy).unwrap();
    let (running, addr) = start_with_policy(origin.addr, &policy, |_| {}).await;
    assert_eq!(marker(&get(addr, "/", &[]).await), "A");

    let second = path_in(&dir, "..2024_01_01_00_01_00.2");
    std::fs::create_dir(&second).unwrap();
    write_in_place(&second.join("policy.vcl"), &marking("B"));
    std::os::unix::fs::symlink("..2024_01_01_00_01_00.2", path_in(&dir, "..data_tmp")).unwrap();
    std::fs::rename(path_in(&dir, "..data_tmp"), path_in(&dir, "..data")).unwrap();
    std::fs::remove_dir_all(&first).unwrap();
    serves_generation(&running, addr, 2, "B").await;
}

#[tokio::test]
async fn include_edits_are_picked_up_and_new_includes_watched() {
    let origin = origin().await;
    let dir = temp_dir();
    let policy = path_in(&dir, "policy.vcl");
    let sub = path_in(&dir, "sub");
    std::fs::create_dir(&sub).unwrap();
    let deliver = sub.join("deliver.vcl");
    write_in_place(
        &deliver,
        "sub vcl_deliver {\n    set resp.http.X-Policy = \"A\";\n}\n",
    );
    write_in_place(&policy, "vcl 4.1;\ninclude \"sub/deliver.vcl\";\n");
    let (running, addr) = start_with_policy(origin.addr, &policy, |_| {}).await;
    assert_eq!(marker(&get(addr, "/", &[]).await), "A");

    // An include in another directory is watched.
    rename_over(
        &deliver,
        "sub vcl_deliver {\n    set resp.http.X-Policy = \"B\";\n}\n",
    );
    serves_generation(&running, addr, 2, "B").await;

    // The watched set follows the includes: a new include is watched after the reload.
    let other = path_in(&dir, "other.vcl");
    write_in_place(
        &other,
        "sub vcl_deliver {\n    set resp.http.X-Policy = \"C\";\n}\n",
    );
    rename_over(&policy, "vcl 4.1;\ninclude \"other.vcl\";\n");
    serves_generation(&running, addr, 3, "C").await;
    write_in_place(
        &other,
        "sub vcl_deliver {\n    set resp.http.X-Policy = \"D\";\n}\n",
    );
    serves_generation(&running, addr, 4, "D").await;
}

#[tokio::test]
async fn a_broken_edit_keeps_the_old_version_and_shows_in_status() {
    let origin = origin().await;
    let (policy, running, addr) = start_watching(origin.addr, &marking("A"), |_| {}).await;
    let status = admin_json(&running, "/status").await;
    assert_eq!(status["generation"], 1);
    assert_eq!(status["reloads"]["last_error"], serde_json::Value::Null);
    let first_hash = status["policy"]["sha256"].as_str().unwrap().to_string();
    assert_eq!(first_hash.len(), 64);

    rename_over(&policy, &broken("B"));
    wait_for_failures(&running, 1).await;
    assert_eq!(
        marker(&get(addr, "/", &[]).await),
        "A",
        "the old version keeps serving"
    );
    assert_eq!(running.active_version().generation, 1);
    let status = admin_json(&running, "/status").await;
    assert_eq!(status["generation"], 1);
    assert_eq!(status["reloads"]["failed"], 1);
    assert_eq!(status["reloads"]["failing"], true);
    let message = status["reloads"]["last_error"]["message"].as_str().unwrap();
    let location = format!("{}:4:", policy.display());
    assert!(message.contains(&location), "file:line:col in {message}");
    assert!(message.contains("expected `;`"), "{message}");
    assert_eq!(status["reloads"]["last_error"]["trigger"], "watch");

    // A later good edit is picked up.
    rename_over(&policy, &marking("C"));
    serves_generation(&running, addr, 2, "C").await;
    let status = admin_json(&running, "/status").await;
    assert_eq!(status["reloads"]["failing"], false);
    assert_eq!(status["reloads"]["ok"], 1);
    assert_ne!(status["policy"]["sha256"].as_str().unwrap(), first_hash);
}

#[tokio::test]
async fn cached_objects_survive_a_reload() {
    let origin = Origin::fixed(OriginReply::ok("cached body").cache_control("max-age=600")).await;
    let (policy, running, addr) = start_watching(origin.addr, &marking("A"), |_| {}).await;
    assert_eq!(get(addr, "/c", &[]).await.cache(), "MISS");
    let hit = get(addr, "/c", &[]).await;
    assert_eq!((hit.cache(), marker(&hit).as_str()), ("HIT", "A"));

    rename_over(&policy, &marking("B"));
    wait_for_generation(&running, 2).await;
    let after = get(addr, "/c", &[]).await;
    assert_eq!(
        after.cache(),
        "HIT",
        "the object stored before the reload is still there"
    );
    assert_eq!(marker(&after), "B", "and is delivered by the new version");
    assert_eq!(after.text(), "cached body");
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn no_watch_ignores_edits_until_asked() {
    let origin = origin().await;
    let (policy, running, addr) =
        start_watching(origin.addr, &marking("A"), |config| config.watch_policy = false).await;
    assert_eq!(admin_json(&running, "/status").await["watching"], false);

    rename_over(&policy, &marking("B"));
    // A negative check needs wall time: several debounce periods pass without a reload.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(running.active_version().generation, 1);
    assert_eq!(marker(&get(addr, "/", &[]).await), "A");

    // What SIGHUP does (serve_until_signal calls the same reloader).
    assert_eq!(running.reload().await.expect("reloads"), 2);
    assert_eq!(marker(&get(addr, "/", &[]).await), "B");

    rename_over(&policy, &broken("C"));
    let failure = running.reload().await.expect_err("a broken policy is refused");
    assert!(failure.message.contains("expected `;`"), "{}", failure.message);
    assert_eq!(marker(&get(addr, "/", &[]).await), "B");
    assert_eq!(running.active_version().generation, 2);
}

#[tokio::test]
async fn touching_without_a_change_does_not_reload() {
    let origin = origin().await;
    let (policy, running, _addr) = start_watching(origin.addr, &marking("A"), |_| {}).await;
    // Same contents, new inode: events fire, the fingerprint says nothing changed.
    rename_over(&policy, &marking("A"));
    std::fs::write(policy.with_file_name("unrelated.txt"), "x").unwrap();
    // A negative check needs wall time: several debounce periods pass without a reload.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(running.active_version().generation, 1);
    // A real change still is.
    write_in_place(&policy, &marking("B"));
    wait_for_generation(&running, 2).await;
}
