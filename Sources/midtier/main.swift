print("midtier")
