#!/usr/bin/env bash
# The system packages the tests need besides Python's (`make test` runs this first): the JDK for DynamoDB
# Local, npm for the node tools, the validators real readers trust (epubcheck, qpdf, poppler's pdftotext,
# unzip; LibreOffice and pandoc for the docx), Chromium (Ace's checks, the Swagger UI test) and valgrind
# (`make bench` counts instructions with its cachegrind, where wall time is too noisy to hold). Each is
# installed only when missing; where that cannot be done here (not root, or no apt-get), it stops at once
# with the one command that installs them.
set -euo pipefail

need=()
command -v java >/dev/null || need+=(openjdk-17-jre-headless)
command -v npm >/dev/null || need+=(npm)
command -v epubcheck >/dev/null || need+=(epubcheck)
command -v qpdf >/dev/null || need+=(qpdf)
command -v unzip >/dev/null || need+=(unzip)
command -v pdftotext >/dev/null || need+=(poppler-utils)
command -v chromium >/dev/null || need+=(chromium)
command -v soffice >/dev/null || need+=(libreoffice-writer-nogui)
command -v pandoc >/dev/null || need+=(pandoc)
command -v valgrind >/dev/null || need+=(valgrind)
((${#need[@]})) || exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "the tests need system packages this machine lacks: ${need[*]}. Install them (Debian or Ubuntu) with:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
echo "installing the tests' system packages: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${need[@]}" >/dev/null
