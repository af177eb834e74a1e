"""pilot.data.images: the image a runtime's load reports, and an image that is not there, in one line."""

from __future__ import annotations

import sys

from pilot.data.images import loaded_as, main, missing


def test_the_loaded_image_is_read_from_docker_and_podman_as_pegasus_reads_it():
    assert loaded_as("Loaded image: localhost/box:test\n") == "localhost/box:test"  # podman, docker
    assert loaded_as("Getting image source signatures\nLoaded image(s): a:1,b:2\n") == "b:2"  # podman, several
    assert loaded_as("Loaded image ID: sha256:9afcf7f1\n") == "sha256:9afcf7f1"  # docker, an untagged archive
    assert loaded_as("Storing signatures\n") is None


def test_a_file_image_that_is_not_there_stops_the_job_before_its_transfer(tmp_path, capsys):
    gone = f"file://{tmp_path}/gone.tar"
    assert missing(gone) == f"container image {gone}: no such file: correct the container's image, or create it"
    assert missing("docker://alpine:3.18") is None
    witness = tmp_path / "ran"
    rc = main(
        [
            "podman",
            str(tmp_path / "box"),
            "localhost/x:1",
            gone,
            "--",
            sys.executable,
            "-c",
            f"open({str(witness)!r}, 'w')",
        ]
    )
    assert rc == 1 and not witness.exists()
    assert (
        capsys.readouterr().err
        == f"container image {gone}: no such file: correct the container's image, or create it\n"
    )


def test_an_image_used_as_staged_is_not_loaded_and_the_transfers_failure_is_kept(tmp_path):
    image = tmp_path / "c.sif"
    image.write_text("squashfs")
    args = ["-", str(image), "-", f"file://{image}", "--"]
    assert main([*args, sys.executable, "-c", "pass"]) == 0
    assert main([*args, sys.executable, "-c", "raise SystemExit(3)"]) == 3


def test_an_image_the_failed_transfer_did_not_bring_is_named_below_its_messages(tmp_path, capsys):
    args = ["podman", str(tmp_path / "box"), "localhost/pilot-box:1", "docker://registry.invalid/box:1", "--"]
    assert main([*args, sys.executable, "-c", "raise SystemExit(1)"]) == 1
    assert capsys.readouterr().err == (
        "container image docker://registry.invalid/box:1: not staged: the transfer "
        "exited 1 (its messages above say why)\n"
    )
    assert main(["podman", "--", "true"]) == 2  # each image is four words
