"""The computations the teaching pages show (plain functions, no Streamlit) and the live Watch trainer."""
