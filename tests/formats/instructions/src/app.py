def main() -> None:
    print("inventory")
